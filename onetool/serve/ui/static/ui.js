// The console reads fine without this file: it only adds the runs page's live list and a confirmation
// before a destructive action.
"use strict";

document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

document.addEventListener("DOMContentLoaded", () => {
  const runs = document.getElementById("runs");
  if (!runs || !window.EventSource) {
    return;
  }
  const live = document.getElementById("live");
  const source = new EventSource(runs.dataset.events);
  source.addEventListener("open", () => { live.textContent = "Live: new runs appear as they end."; });
  source.addEventListener("error", () => { live.textContent = "Live updates paused; reconnecting."; });
  source.addEventListener("run", (event) => {
    // The row is rendered (and escaped) by the server's own template.
    runs.insertAdjacentHTML("afterbegin", event.data);
    const none = document.getElementById("no-runs");
    if (none) {
      none.remove();
    }
    while (runs.rows.length > 200) {
      runs.deleteRow(-1);
    }
  });
});
