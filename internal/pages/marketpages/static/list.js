// pmx markets list: follows the lifecycle channel (statuses, new markets) and each listed market's
// trades (last price and volume), resuming each from the seq its row was rendered at.
"use strict";

(function () {
  const dom = window.pmxDOM;
  const tbody = document.querySelector("#markets tbody");
  const rows = new Map(); // market id → {tr, seq, volume}
  const firstPage = !new URLSearchParams(location.search).has("before");

  function track(tr) {
    rows.set(tr.dataset.market, { tr: tr, seq: Number(tr.dataset.seq), volume: Number(tr.querySelector(".volume").dataset.volume) });
  }
  if (tbody) tbody.querySelectorAll("tr[data-market]").forEach(track);

  function subscribeTrades(send, id) {
    send({ op: "subscribe", channel: "trades", marketId: id, resumeFrom: rows.get(id).seq });
  }

  function flash(tr) {
    tr.classList.remove("fresh");
    void tr.offsetWidth; // restarts the animation
    tr.classList.add("fresh");
    tr.addEventListener("animationend", function () { tr.classList.remove("fresh"); }, { once: true });
  }

  function applyTrades(message) {
    const row = rows.get(message.marketId);
    if (!row) return;
    let changed = false;
    for (const e of message.events) {
      if (e.seq <= row.seq) continue; // already counted
      row.seq = e.seq;
      row.tr.dataset.seq = String(e.seq);
      row.volume += e.quantity;
      const price = row.tr.querySelector(".last-price");
      price.dataset.price = String(e.price);
      price.textContent = dom.cents(e.price);
      changed = true;
    }
    if (changed) {
      const volume = row.tr.querySelector(".volume");
      volume.dataset.volume = String(row.volume);
      volume.textContent = dom.shares(row.volume);
      flash(row.tr);
    }
  }

  function setStatus(id, status) {
    const row = rows.get(id);
    if (!row) return;
    const badge = row.tr.querySelector(".status");
    badge.dataset.status = status;
    badge.textContent = status;
    flash(row.tr);
  }

  // A new market: the list as the server renders it now gives its row.
  let fetching = false;
  function listed(send) {
    if (!firstPage || fetching) return;
    if (!tbody) {
      location.reload();
      return;
    }
    fetching = true;
    fetch("/markets", { headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error(r.status)); })
      .then(function (html) {
        const page = new DOMParser().parseFromString(html, "text/html");
        const fresh = Array.from(page.querySelectorAll("#markets tbody tr[data-market]"))
          .filter(function (tr) { return !rows.has(tr.dataset.market); });
        fresh.reverse().forEach(function (tr) {
          const node = document.importNode(tr, true);
          tbody.insertBefore(node, tbody.firstChild);
          track(node);
          subscribeTrades(send, node.dataset.market);
          flash(node);
        });
        if (fresh.length > 0) {
          const note = document.getElementById("listed");
          note.textContent = fresh.length === 1 ? "A new market was just listed." : fresh.length + " new markets were just listed.";
          note.classList.remove("hidden");
        }
      })
      .catch(function () {})
      .then(function () { fetching = false; });
  }

  const feed = window.pmxFeed({
    open: function (send) {
      send({ op: "subscribe", channel: "lifecycle" });
      rows.forEach(function (_, id) { subscribeTrades(send, id); });
    },
    message: function (m, send) {
      if (m.type === "events" && m.channel === "trades") {
        applyTrades(m);
      } else if (m.type === "market") {
        if (m.change === "listed") listed(send);
        else setStatus(m.marketId, m.status);
      } else if (m.type === "error") {
        if (m.code === "resync_required") {
          location.reload(); // the feed no longer keeps what the row missed: render it again
        } else if (m.code === "rate_limited" || m.code === "unavailable") {
          setTimeout(feed.restart, 2000);
        }
      }
    },
  });
})();
