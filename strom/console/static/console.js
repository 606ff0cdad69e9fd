// strom console: the page's only script. Elements with data-refresh="URL" are re-fetched every
// data-interval ms and their content replaced by the server-rendered fragment (live charts, lag,
// followed messages). Polling pauses while the tab is hidden; a failed fetch keeps the old content.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const el of document.querySelectorAll("[data-refresh]")) {
    const interval = Math.max(250, parseInt(el.dataset.interval || "2000", 10));
    let busy = false;
    setInterval(async () => {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const response = await fetch(el.dataset.refresh, { cache: "no-store" });
        if (response.ok) el.innerHTML = await response.text();
      } catch (e) {
        // the console went away: keep what is shown
      } finally {
        busy = false;
      }
    }, interval);
  }
});
