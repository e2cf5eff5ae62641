// pmx event page: each outcome's YES price as a probability bar, its book top and last price, and
// the sum of the outcomes' mids. An outcome is a market: the page follows each outcome's book
// channel (a snapshot, then every event, gapless by seq), as a market page follows its one, and
// the lifecycle channel for the halted badge (pmxHalt): what halts the event's markets together,
// its pause or the exchange's halt, which every message of one of them says.
"use strict";

(function () {
  const dom = window.pmxDOM;
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const outcomes = new Map(); // market id → its state and row
  let status = data.status;

  data.outcomes.forEach(function (o) {
    outcomes.set(o.marketId, {
      row: document.querySelector('#outcomes tr[data-market="' + o.marketId + '"]'),
      bids: new Map(), asks: new Map(), // YES prices → shares, once a snapshot came
      bid: o.bestBid, ask: o.bestAsk, last: o.lastPrice, // what the page was rendered with, until then
      seq: 0, whole: false,
    });
  });

  // yesMid is GET /event's yesMid: the middle of the range the book leaves open for the YES price,
  // an empty side counting at its bound (no bid at 0, no ask at 100).
  function yesMid(bid, ask) {
    return ((bid === null ? 0 : bid) + (ask === null ? 100 : ask)) / 2;
  }

  function best(o) {
    if (!o.whole) return { bid: o.bid, ask: o.ask };
    let bid = null, ask = null;
    o.bids.forEach(function (q, p) { if (q > 0 && (bid === null || p > bid)) bid = p; });
    o.asks.forEach(function (q, p) { if (q > 0 && (ask === null || p < ask)) ask = p; });
    return { bid: bid, ask: ask };
  }

  function cell(row, cls, value, text) {
    const td = row.querySelector("." + cls);
    td.dataset.value = value === null ? "" : String(value);
    td.textContent = text;
  }

  // render draws an outcome's row: the bar shows the mid while both sides of the book are there;
  // with a side empty, the last trade's price if there was one (a one-sided mid is mostly the
  // bound), else the mid; the text beside the bar says which.
  function render(o) {
    const b = best(o);
    const mid = yesMid(b.bid, b.ask);
    let value = mid, basis = "mid";
    if ((b.bid === null || b.ask === null) && o.last !== null && o.last !== undefined) {
      value = o.last;
      basis = "last";
    }
    const row = o.row;
    row.dataset.seq = String(o.seq);
    row.dataset.live = String(o.whole);
    row.querySelector(".bar-fill").setAttribute("width", String(value));
    const prob = row.querySelector(".prob");
    prob.dataset.value = String(value);
    prob.dataset.basis = basis;
    row.querySelector(".prob-value").textContent = value + "¢";
    row.querySelector(".basis").textContent = basis === "mid" ? "mid" : "last trade";
    cell(row, "bid", b.bid, dom.cents(b.bid));
    cell(row, "ask", b.ask, dom.cents(b.ask));
    cell(row, "mid", mid, mid + "¢");
    cell(row, "last", o.last === undefined ? null : o.last, dom.cents(o.last));
    return mid;
  }

  function renderAll() {
    let sum = 0;
    outcomes.forEach(function (o) { sum += render(o); });
    const total = document.getElementById("mid-sum");
    total.dataset.sum = String(sum);
    total.textContent = sum + "¢";
  }

  // setStatus shows the event's status (its markets'); a resolution or a void is shown as the
  // server renders it, with the outcome that won.
  function setStatus(s) {
    if (s === status) return;
    status = s;
    const badge = document.getElementById("status");
    badge.dataset.status = s;
    badge.textContent = s;
    if (s === "RESOLVED" || s === "CANCELED") setTimeout(function () { location.reload(); }, 1000);
  }

  function applyBook(message) {
    const o = outcomes.get(message.marketId);
    if (!o) return;
    if (message.type === "snapshot") {
      o.bids.clear();
      o.asks.clear();
      message.bids.forEach(function (l) { o.bids.set(l.price, l.quantity); });
      message.asks.forEach(function (l) { o.asks.set(l.price, l.quantity); });
      o.seq = message.seq;
      o.whole = true;
      o.last = message.lastPrice;
      setStatus(message.status);
      renderAll();
      return;
    }
    for (const e of message.events) {
      if (e.seq <= o.seq) continue;
      if (e.seq !== o.seq + 1) {
        feed.restart(); // a gap: reconnect and resume every outcome from its seq
        return;
      }
      o.seq = e.seq;
      if (e.type === "level") (e.side === "bid" ? o.bids : o.asks).set(e.price, e.quantity);
      else if (e.type === "trade") o.last = e.price;
      else if (e.type === "status") setStatus(e.status);
    }
    renderAll();
  }

  function subscribe(send, id) {
    const o = outcomes.get(id);
    const book = { op: "subscribe", channel: "book", marketId: id };
    if (o.whole) book.resumeFrom = o.seq; // resume; the first time, a snapshot of the whole book
    send(book);
  }

  renderAll();

  const live = document.getElementById("live");
  const halt = window.pmxHalt(function (m) {
    if (!outcomes.has(m.marketId)) return null;
    return m.halted === "event" || m.halted === "exchange" ? m.halted : ""; // a market's own pause is not its event's
  });
  const feed = window.pmxFeed({
    open: function (send) {
      halt.open(send);
      outcomes.forEach(function (_, id) { subscribe(send, id); });
    },
    message: function (m, send) {
      if (halt.message(m)) return;
      if (m.channel === "book" && (m.type === "snapshot" || m.type === "events")) applyBook(m);
      else if (m.type === "error") {
        if (m.code === "resync_required" && m.channel === "book" && outcomes.has(m.marketId)) {
          outcomes.get(m.marketId).whole = false; // the feed no longer keeps those events: start again from a snapshot
          subscribe(send, m.marketId);
        } else if (m.code === "unknown_market") {
          live.dataset.state = "error";
          live.textContent = "not live: the feed does not know this event's markets";
        } else if (m.code === "rate_limited" && outcomes.has(m.marketId)) {
          // An event subscribes once per outcome, up to 50 at once: ask again for the one refused,
          // when the feed says, rather than all of them again.
          setTimeout(function () { subscribe(send, m.marketId); }, 1000 * (m.retryAfterSeconds || 1) + Math.random() * 500);
        } else if (m.code !== "already_subscribed") {
          setTimeout(feed.restart, 2000); // unavailable: try again
        }
      }
    },
  });
})();
