// The console reads fine without this file: it only adds the runs page's live list and a confirmation
// before an action that takes a server or its tools away.
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
  // From the last run the page shows; on a reconnect the browser sends the last one it added (Last-Event-ID).
  const source = new EventSource(runs.dataset.events + "?after=" + encodeURIComponent(runs.dataset.after));
  let paused = null;
  source.addEventListener("open", () => {
    clearTimeout(paused);
    live.textContent = "Live: new runs appear as they end.";
  });
  // The server ends each stream after a while and the browser opens the next at once: only a reconnect that
  // takes seconds is worth saying.
  source.addEventListener("error", () => {
    clearTimeout(paused);
    paused = setTimeout(() => { live.textContent = "Live updates paused; reconnecting."; }, 5000);
  });
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
