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
