// pmx market pages: the live feed both pages follow, GET /api/v1/ws/public (the API's WebSocket
// feed without a key: book, trades, ticker and lifecycle; see /api/v1/asyncapi.yaml). It
// reconnects after any close, backing off, and calls open() again so the page subscribes again,
// resuming from the last seq it applied; restart() closes the connection on purpose (a gap).
"use strict";

window.pmxFeed = function (handlers) {
  const live = document.getElementById("live");
  let ws = null;
  let failures = 0;
  let pinger = 0;
  let nextId = 1;

  function state(name, text) {
    if (live) {
      live.dataset.state = name;
      live.textContent = text;
    }
  }

  function send(message) {
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    if (message.op !== "ping") message.id = nextId++;
    ws.send(JSON.stringify(message));
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + "/api/v1/ws/public");
    ws = socket;
    socket.onopen = function () {
      failures = 0;
      state("live", "live");
      // The server closes a client silent for 60 s.
      pinger = setInterval(function () { send({ op: "ping" }); }, 25000);
      handlers.open(send);
    };
    socket.onmessage = function (event) {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch (e) {
        return;
      }
      if (message.type === "heartbeat" || message.type === "pong") return;
      handlers.message(message, send);
    };
    socket.onclose = function () {
      clearInterval(pinger);
      if (ws !== socket) return;
      ws = null;
      state("reconnecting", "reconnecting…");
      const wait = Math.min(10000, 250 * Math.pow(2, failures++)) + Math.random() * 250;
      setTimeout(connect, wait);
    };
  }

  connect();
  return {
    send: send,
    // restart drops the connection; the next one resumes from the page's last seq.
    restart: function () {
      if (ws) ws.close();
    },
  };
};

// pmxHalt keeps the halted badge of a market's or an event's page (#halted, which the server
// renders hidden while trading goes on) live, from the feed's lifecycle channel, which says when
// what halts a market changes (halted, resumed; within about a second of the change) and is live
// only: so once the page's lifecycle subscription is confirmed, it reads the badge from the page as
// the server renders it now, which closes the gap between the page's render and the subscription
// (and any while the connection was lost). A lifecycle message that comes while that read is on
// its way wins over it: the read may be older, and any change after the subscription comes as a
// message. haltedOf(m) is what halts the page's market or event by a lifecycle message of an OPEN
// or CLOSED market ("" for nothing), or null for a message of another market. The page calls
// open(send) from its feed's open, and message(m) with each message, which answers whether it was
// the halts'.
window.pmxHalt = function (haltedOf) {
  const badge = document.getElementById("halted");
  let told = 0; // lifecycle messages applied: a read of the page begun before one is older

  function show(by) {
    badge.dataset.halted = by;
    badge.textContent = "halted (" + by + ")";
    badge.classList.toggle("hidden", !by);
  }

  // recheck reads the page's badge as the server renders it now; a refusal (429 above all) is
  // tried again when the server says, at most tries times.
  function recheck(tries) {
    const before = told;
    fetch(location.pathname, { headers: { Accept: "text/html" }, cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r); })
      .then(function (html) {
        const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("halted");
        if (told === before && fresh) show(fresh.dataset.halted || "");
        badge.dataset.live = "true"; // for whoever checks the page: the badge follows the feed
      })
      .catch(function (r) {
        if (tries <= 1) return;
        const wait = r && r.headers ? Number(r.headers.get("Retry-After")) || 1 : 1;
        setTimeout(function () { recheck(tries - 1); }, wait * 1000 + Math.random() * 500);
      });
  }

  return {
    open: function (send) {
      badge.dataset.live = "false";
      send({ op: "subscribe", channel: "lifecycle" });
    },
    message: function (m) {
      if (m.channel !== "lifecycle") return false;
      if (m.type === "subscribed") {
        recheck(3);
      } else if (m.type === "market" && (m.status === "OPEN" || m.status === "CLOSED")) {
        const by = haltedOf(m);
        if (by !== null) {
          told++;
          show(by);
        }
      }
      return m.type !== "error";
    },
  };
};

// pmx's small DOM helpers, shared by the pages' scripts.
window.pmxDOM = {
  el: function (tag, attrs, text) {
    const node = document.createElement(tag);
    for (const name in attrs || {}) node.setAttribute(name, attrs[name]);
    if (text !== undefined) node.textContent = text;
    return node;
  },
  svg: function (tag, attrs, text) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const name in attrs || {}) node.setAttribute(name, attrs[name]);
    if (text !== undefined) node.textContent = text;
    return node;
  },
  shares: function (n) {
    return Number(n).toLocaleString("en-US");
  },
  cents: function (p) {
    return p === null || p === undefined ? "—" : p + "¢";
  },
};
