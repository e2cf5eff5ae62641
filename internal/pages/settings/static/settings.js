// pmx developer settings: the copy button of a new API key. The page works without it.
"use strict";
document.addEventListener("click", function (event) {
  var button = event.target.closest("[data-copy]");
  if (!button) return;
  var field = document.getElementById(button.getAttribute("data-copy"));
  if (!field) return;
  function show(text) {
    button.textContent = text;
    setTimeout(function () { button.textContent = "Copy"; }, 2000);
  }
  function fallback() {
    field.focus();
    field.select();
    try {
      show(document.execCommand("copy") ? "Copied" : "Press Ctrl+C");
    } catch (e) {
      show("Press Ctrl+C");
    }
  }
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(function () { show("Copied"); }, fallback);
  } else {
    fallback();
  }
});
