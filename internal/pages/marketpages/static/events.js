// pmx events list: follows the lifecycle channel, whose status messages name the event of an
// event's markets (they move together: the event's status is theirs), and whose listings bring a
// new event's row.
"use strict";

(function () {
  const tbody = document.querySelector("#events tbody");
  const rows = new Map(); // event id → tr
  const firstPage = !new URLSearchParams(location.search).has("before");

  if (tbody) tbody.querySelectorAll("tr[data-event]").forEach(function (tr) { rows.set(tr.dataset.event, tr); });

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
          rows.set(node.dataset.event, node);
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

  const feed = window.pmxFeed({
    open: function (send) {
      send({ op: "subscribe", channel: "lifecycle" });
    },
    message: function (m) {
      if (m.type === "market" && m.eventId) {
        if (m.change === "listed" && !rows.has(m.eventId)) refresh(0, m.eventId);
        else if (m.change === "status") setStatus(m.eventId, m.status);
      } else if (m.type === "error") {
        if (m.code === "resync_required") location.reload();
        else if (m.code === "rate_limited" || m.code === "unavailable") setTimeout(feed.restart, 2000);
      }
    },
  });
})();
