// pmx market page: the book (ladder and depth chart, in YES and NO views), the price chart and the
// recent trades, from the API's answers the page embeds, then live from the feed: the book
// channel (a snapshot, then every event, each seq the one after the last; a gap or a lost
// connection resumes from the last seq applied), the trades channel (from the seq of the book
// the page was rendered with, so that no trade between the render and the feed is missed) and
// the lifecycle channel, for the halted badge (pmxHalt: the market's own pause, its event's or
// the exchange's halt).
"use strict";

(function () {
  const dom = window.pmxDOM;
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const marketId = data.market.id;
  const depthLevels = 10; // levels a side the ladder shows, as GET /market/order-book does

  // The book in YES terms, price → shares. Until the feed's snapshot, the embedded book's levels.
  const bids = new Map();
  const asks = new Map();
  data.book.orderBookYes.bids.forEach(function (l) { bids.set(l.price, l.quantity); });
  data.book.orderBookYes.asks.forEach(function (l) { asks.set(l.price, l.quantity); });
  let seq = data.book.seq; // the last event the book reflects
  let whole = false; // the book came from the feed's snapshot (every level, not only the best 10)
  let tradesSeq = data.book.seq; // the trades channel is followed from here
  let lastPrice = data.book.orderBookYes.lastTradePrice;
  let status = data.market.status;
  let view = "YES";

  const trades = data.trades.slice(); // newest first, as GET /market/trades answers
  const tradeIds = new Set(trades.map(function (t) { return t.id; }));
  const candles = data.candles.slice();
  const step = data.intervalSeconds * 1000;
  const chartFrom = Math.floor(Date.parse(data.from) / step) * step;

  // levels is a side of the current view, best first, with cumulative totals: the NO view's bids
  // are the YES asks at 100 − p and its asks the YES bids at 100 − p.
  function levels(side, limit) {
    const yesSide = view === "YES" ? (side === "bid" ? bids : asks) : (side === "bid" ? asks : bids);
    let prices = Array.from(yesSide.keys()).filter(function (p) { return yesSide.get(p) > 0; });
    prices.sort(function (a, b) { return a - b; });
    let out = prices.map(function (p) { return { price: view === "YES" ? p : 100 - p, quantity: yesSide.get(p) }; });
    out.sort(function (a, b) { return side === "bid" ? b.price - a.price : a.price - b.price; });
    if (limit) out = out.slice(0, limit);
    let total = 0;
    out.forEach(function (l) { total += l.quantity; l.total = total; });
    return out;
  }

  function renderLadder() {
    const bidLevels = levels("bid", depthLevels);
    const askLevels = levels("ask", depthLevels);
    const row = function (side, l) {
      const tr = dom.el("tr", { class: side, "data-side": side, "data-price": l.price, "data-quantity": l.quantity, "data-total": l.total });
      tr.append(dom.el("td", { class: "price" }, l.price + "¢"), dom.el("td", {}, dom.shares(l.quantity)), dom.el("td", {}, dom.shares(l.total)));
      return tr;
    };
    // Asks above the spread, best (lowest) nearest it; bids below, best first.
    document.getElementById("asks").replaceChildren.apply(document.getElementById("asks"),
      askLevels.slice().reverse().map(function (l) { return row("ask", l); }));
    document.getElementById("bids").replaceChildren.apply(document.getElementById("bids"),
      bidLevels.map(function (l) { return row("bid", l); }));
    const spread = document.getElementById("spread");
    if (bidLevels.length && askLevels.length) spread.textContent = "spread " + (askLevels[0].price - bidLevels[0].price) + "¢";
    else if (!bidLevels.length && !askLevels.length) spread.textContent = "no orders rest in the book";
    else spread.textContent = bidLevels.length ? "no asks" : "no bids";
    document.getElementById("view-hint").textContent = view === "YES"
      ? "Prices of a YES share. A NO bid at X shows here as a YES ask at 100 − X."
      : "Prices of a NO share: the same book, mirrored. A YES bid at X shows here as a NO ask at 100 − X.";
  }

  // The depth chart: cumulative shares against price (1–99¢), bids left of the spread, asks right.
  const W = 600, H = 220, L = 48, R = 12, T = 12, B = 28;
  function x(p) { return L + (p / 100) * (W - L - R); }

  function renderDepth() {
    const svg = document.getElementById("depth");
    const bidLevels = levels("bid", 0);
    const askLevels = levels("ask", 0);
    const max = Math.max(1, bidLevels.length ? bidLevels[bidLevels.length - 1].total : 0, askLevels.length ? askLevels[askLevels.length - 1].total : 0);
    const y = function (q) { return H - B - (q / max) * (H - T - B); };
    const nodes = axes(y, max, dom.shares, [0, 25, 50, 75, 100].map(function (p) { return [x(p), p + "¢"]; }));
    const area = function (ls, cls, edge) {
      if (!ls.length) return;
      let d = "M" + x(ls[0].price) + "," + y(0) + " L" + x(ls[0].price) + "," + y(ls[0].total);
      for (let i = 1; i < ls.length; i++) d += " L" + x(ls[i].price) + "," + y(ls[i - 1].total) + " L" + x(ls[i].price) + "," + y(ls[i].total);
      d += " L" + x(edge) + "," + y(ls[ls.length - 1].total) + " L" + x(edge) + "," + y(0) + " Z";
      nodes.push(dom.svg("path", { class: cls, d: d }));
    };
    area(bidLevels, "bid-area", 0);
    area(askLevels, "ask-area", 100);
    if (!bidLevels.length && !askLevels.length) nodes.push(dom.svg("text", { class: "empty-note", x: W / 2, y: H / 2, "text-anchor": "middle" }, "No orders rest in the book"));
    svg.replaceChildren.apply(svg, nodes);
  }

  // axes draws the frame, the y scale (0 to max, each whole value once: a scale of 1 share reads 0
  // and 1, not 0, 1 and 1) and the x ticks.
  function axes(y, max, fmt, xticks) {
    const nodes = [dom.svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), dom.svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B })];
    [0, max / 2, max].map(Math.round).filter(function (q, i, all) { return all.indexOf(q) === i; }).forEach(function (q) {
      nodes.push(dom.svg("text", { class: "tick", x: L - 6, y: y(q) + 4, "text-anchor": "end" }, fmt(q)));
    });
    xticks.forEach(function (t, i) {
      const anchor = i === 0 ? "start" : i === xticks.length - 1 ? "end" : "middle";
      nodes.push(dom.svg("text", { class: "tick", x: t[0], y: H - B + 16, "text-anchor": anchor }, t[1]));
    });
    return nodes;
  }

  // The price chart: each candle's close (the YES price, 0–100¢) at its interval's start.
  function renderPrice() {
    const svg = document.getElementById("price-chart");
    const end = Math.max(Date.parse(data.to), Date.now(), chartFrom + step);
    const t = function (ms) { return L + ((ms - chartFrom) / (end - chartFrom)) * (W - L - R); };
    const y = function (p) { return H - B - (p / 100) * (H - T - B); };
    const label = function (ms) {
      const d = new Date(ms);
      return step >= 86400000 ? d.toISOString().slice(5, 10) : d.toISOString().slice(11, 16);
    };
    const nodes = axes(y, 100, function (p) { return p + "¢"; }, [chartFrom, (chartFrom + end) / 2, end].map(function (ms) { return [t(ms), label(ms)]; }));
    if (!candles.length) {
      nodes.push(dom.svg("text", { class: "empty-note", x: W / 2, y: H / 2, "text-anchor": "middle" }, "No trades yet"));
    } else {
      let d = "";
      candles.forEach(function (c, i) {
        const px = t(Date.parse(c.start)), py = y(c.close);
        d += (i ? " L" : "M") + px + "," + py;
      });
      const last = candles[candles.length - 1];
      d += " L" + t(end) + "," + y(last.close);
      nodes.push(dom.svg("path", { class: "line", d: d }));
      candles.forEach(function (c) {
        nodes.push(dom.svg("circle", { class: "point", cx: t(Date.parse(c.start)), cy: y(c.close), r: 3,
          "data-start": c.start, "data-open": c.open, "data-high": c.high, "data-low": c.low, "data-close": c.close, "data-volume": c.volume }));
      });
    }
    svg.replaceChildren.apply(svg, nodes);
  }

  // addToCandles folds a live trade into its interval's candle, as the exchange does.
  function addToCandles(price, quantity, at) {
    const start = Math.floor(Date.parse(at) / step) * step;
    let c = candles[candles.length - 1];
    if (!c || Date.parse(c.start) < start) {
      c = { start: new Date(start).toISOString().replace(".000Z", "Z"), open: price, high: price, low: price, close: price, volume: 0, trades: 0 };
      candles.push(c);
    } else if (Date.parse(c.start) > start) {
      return; // older than the chart's last interval: already in it
    }
    c.high = Math.max(c.high, price);
    c.low = Math.min(c.low, price);
    c.close = price;
    c.volume += quantity;
    c.trades += 1;
  }

  function renderTrades() {
    const tbody = document.querySelector("#trades tbody");
    tbody.replaceChildren.apply(tbody, trades.map(function (tr) {
      const row = dom.el("tr", { "data-trade": tr.id, "data-yes-price": tr.yesPrice, "data-quantity": tr.quantity, "data-created-at": tr.createdAt });
      const at = new Date(tr.createdAt);
      row.append(
        dom.el("td", { "data-label": "Time" }, at.toISOString().slice(0, 10) === new Date().toISOString().slice(0, 10) ? at.toISOString().slice(11, 19) : at.toISOString().slice(0, 16).replace("T", " ")),
        dom.el("td", { class: "taker " + tr.side, "data-label": "Taker" }, tr.side + " " + tr.outcome),
        dom.el("td", { class: "num", "data-label": "Price" }, tr.price + "¢ " + tr.outcome),
        dom.el("td", { class: "num", "data-label": "YES" }, tr.yesPrice + "¢"),
        dom.el("td", { class: "num", "data-label": "Shares" }, dom.shares(tr.quantity)));
      return row;
    }));
    document.getElementById("no-trades").classList.toggle("hidden", trades.length > 0);
  }

  function renderFacts() {
    const badge = document.getElementById("status");
    badge.dataset.status = status;
    badge.textContent = status;
    const price = document.getElementById("last-price");
    price.dataset.price = lastPrice === null || lastPrice === undefined ? "" : String(lastPrice);
    price.textContent = dom.cents(lastPrice);
  }

  function renderBook() {
    renderLadder();
    renderDepth();
    // For whoever checks the page (the browser test): the seq the ladder shows, and whether it
    // follows the feed yet.
    const ladder = document.getElementById("ladder");
    ladder.dataset.seq = String(seq);
    ladder.dataset.live = String(whole);
  }

  function applyBook(message) {
    if (message.type === "snapshot") {
      bids.clear();
      asks.clear();
      message.bids.forEach(function (l) { bids.set(l.price, l.quantity); });
      message.asks.forEach(function (l) { asks.set(l.price, l.quantity); });
      seq = message.seq;
      whole = true;
      status = message.status;
      lastPrice = message.lastPrice;
      renderBook();
      renderFacts();
      return;
    }
    for (const e of message.events) {
      if (e.seq <= seq) continue;
      if (e.seq !== seq + 1) {
        feed.restart(); // a gap: reconnect and resume from seq
        return;
      }
      seq = e.seq;
      if (e.type === "level") (e.side === "bid" ? bids : asks).set(e.price, e.quantity);
      else if (e.type === "trade") lastPrice = e.price;
      else if (e.type === "status") {
        status = e.status;
        // A settled market's outcome is on the page as the server renders it.
        if (status === "RESOLVED") setTimeout(function () { location.reload(); }, 1000);
      }
    }
    renderBook();
    renderFacts();
  }

  function applyTrades(message) {
    let changed = false;
    for (const e of message.events) {
      if (e.seq <= tradesSeq) continue;
      tradesSeq = e.seq;
      if (tradeIds.has(e.tradeId)) continue; // in the page's trades already
      tradeIds.add(e.tradeId);
      trades.unshift({ id: e.tradeId, marketId: marketId, outcome: e.takerOutcome, side: e.takerSide,
        price: e.takerOutcome === "YES" ? e.price : 100 - e.price, quantity: e.quantity, yesPrice: e.price, createdAt: e.at });
      addToCandles(e.price, e.quantity, e.at);
      changed = true;
    }
    if (changed) {
      while (trades.length > 50) tradeIds.delete(trades.pop().id);
      renderTrades();
      renderPrice();
    }
  }

  function setView(v) {
    view = v;
    document.getElementById("view-yes").setAttribute("aria-pressed", String(v === "YES"));
    document.getElementById("view-no").setAttribute("aria-pressed", String(v === "NO"));
    renderBook();
  }
  document.getElementById("view-yes").addEventListener("click", function () { setView("YES"); });
  document.getElementById("view-no").addEventListener("click", function () { setView("NO"); });

  renderBook();
  renderPrice();
  renderTrades();
  renderFacts();

  const live = document.getElementById("live");
  const halt = window.pmxHalt(function (m) { return m.marketId === marketId ? m.halted || "" : null; });
  const feed = window.pmxFeed({
    open: function (send) {
      halt.open(send);
      const book = { op: "subscribe", channel: "book", marketId: marketId };
      if (whole) book.resumeFrom = seq; // resume; the first time, a snapshot of the whole book
      send(book);
      send({ op: "subscribe", channel: "trades", marketId: marketId, resumeFrom: tradesSeq });
    },
    message: function (m, send) {
      if (halt.message(m)) return;
      if (m.channel === "book" && (m.type === "snapshot" || m.type === "events")) applyBook(m);
      else if (m.channel === "trades" && m.type === "events") applyTrades(m);
      else if (m.type === "error") {
        if (m.code === "resync_required" && m.channel === "book") {
          whole = false; // the feed no longer keeps those events: start again from a snapshot
          send({ op: "subscribe", channel: "book", marketId: marketId });
        } else if (m.code === "resync_required") {
          location.reload();
        } else if (m.code === "unknown_market") {
          live.dataset.state = "error";
          live.textContent = "not live: the feed does not know this market";
        } else {
          setTimeout(feed.restart, 2000); // rate_limited, unavailable: try again
        }
      }
    },
  });
})();
