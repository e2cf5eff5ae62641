// pmx events list: follows the lifecycle channel. An event's markets move together, so a status
// message of any of them is the event's status (each row lists its markets: a message the feed
// sent before it learnt the market's event still finds its row); a listing of a market of an
// event the page does not show brings that event's row.
"use strict";

(function () {
  const tbody = document.querySelector("#events tbody");
  const rows = new Map(); // event id → tr
  const events = new Map(); // market id → its event's id
  const firstPage = !new URLSearchParams(location.search).has("before");

  function track(tr) {
    rows.set(tr.dataset.event, tr);
    tr.dataset.markets.split(" ").forEach(function (m) { events.set(m, tr.dataset.event); });
  }
  if (tbody) tbody.querySelectorAll("tr[data-event]").forEach(track);

  function flash(tr) {
    tr.classList.remove("fresh");
    void tr.offsetWidth; // restarts the animation
    tr.classList.add("fresh");
    tr.addEventListener("animationend", function () { tr.classList.remove("fresh"); }, { once: true });
  }

  function setStatus(id, status) {
    const tr = rows.get(id);
    if (!tr) return;
    const badge = tr.querySelector(".status");
    if (badge.dataset.status === status) return;
    badge.dataset.status = status;
    badge.textContent = status;
    const won = tr.querySelector(".resolution");
    if (won) won.remove();
    flash(tr);
    if (status === "RESOLVED") refresh(0, id); // the row as the server renders it names the outcome that won
  }

  // refresh reads the list as the server renders it now (a snapshot at most a second old): new
  // events' rows go on top, and a row whose status the page already shows takes the server's
  // (with its resolution). A snapshot older than the feed is read again, a few times.
  let fetching = false;
  function refresh(attempt, want) {
    if (!firstPage || fetching) return;
    if (!tbody) {
      location.reload();
      return;
    }
    fetching = true;
    let stale = false;
    fetch("/events", { headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error(r.status)); })
      .then(function (html) {
        const page = new DOMParser().parseFromString(html, "text/html");
        const all = Array.from(page.querySelectorAll("#events tbody tr[data-event]"));
        if (want && !all.some(function (tr) { return tr.dataset.event === want; })) stale = true;
        const fresh = all.filter(function (tr) { return !rows.has(tr.dataset.event); });
        all.forEach(function (tr) {
          const mine = rows.get(tr.dataset.event);
          if (!mine) return;
          const shown = mine.querySelector(".status").dataset.status;
          if (tr.querySelector(".status").dataset.status !== shown) stale = true;
          else if (shown === "RESOLVED" && !mine.querySelector(".resolution")) {
            mine.replaceChild(document.importNode(tr.children[1], true), mine.children[1]);
          }
        });
        fresh.reverse().forEach(function (tr) {
          const node = document.importNode(tr, true);
          tbody.insertBefore(node, tbody.firstChild);
          track(node);
          flash(node);
        });
        if (fresh.length > 0) {
          const note = document.getElementById("listed");
          note.textContent = fresh.length === 1 ? "A new event was just listed." : fresh.length + " new events were just listed.";
          note.classList.remove("hidden");
        }
      })
      .catch(function () { stale = true; })
      .then(function () {
        fetching = false;
        if (stale && attempt < 5) setTimeout(function () { refresh(attempt + 1, want); }, 1200);
      });
  }

  const list = document.getElementById("events");
  let opened = false;
  const feed = window.pmxFeed({
    open: function (send) {
      // lifecycle is not resumed: after a lost connection, the list as the server has it now.
      if (opened) location.reload();
      opened = true;
      send({ op: "subscribe", channel: "lifecycle" });
    },
    message: function (m) {
      if (m.type === "subscribed" && m.channel === "lifecycle") {
        if (list) list.dataset.live = "true"; // for whoever checks the page: changes from here on show
      } else if (m.type === "market") {
        const id = m.eventId || events.get(m.marketId);
        if (!id) return; // a market of its own
        if (m.change === "listed" && !rows.has(id)) refresh(0, id);
        else if (m.change === "status") setStatus(id, m.status);
      } else if (m.type === "error") {
        if (m.code === "resync_required") location.reload();
        else if (m.code === "rate_limited" || m.code === "unavailable") setTimeout(feed.restart, 2000);
      }
    },
  });
})();
