// taskforge dashboard: times in the viewer's zone, and a live refresh of the page's <main>.
// Served by the package itself; no library, no CDN.
(function () {
  "use strict";

  function pad(n) { return String(n).padStart(2, "0"); }

  function local(d) {
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function seconds(s) {
    if (s < 90) { return Math.max(0, Math.round(s)) + " s"; }
    if (s < 5400) { return Math.round(s / 60) + " min"; }
    return (s / 3600).toFixed(1) + " h";
  }

  function localize(root) {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) { return; }
      if (el.classList.contains("since")) {
        el.textContent = seconds((Date.now() - d.getTime()) / 1000) + " ago";
      } else {
        el.textContent = local(d);
      }
      el.title = el.getAttribute("datetime") + " (shown in " + zone + ")";
      el.dataset.zone = zone;
    });
    root.querySelectorAll("[data-since]").forEach(function (el) {
      var d = new Date(el.dataset.since);
      if (!isNaN(d)) { el.textContent = seconds((Date.now() - d.getTime()) / 1000); }
    });
  }

  function busy() {
    var el = document.activeElement;
    if (el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA")) { return true; }
    // A form changed but not sent (the search's) is the user's: a refresh would throw away what they chose.
    return document.querySelector("form[data-edited]") !== null;
  }

  document.addEventListener("input", function (e) {
    if (e.target && e.target.form) { e.target.form.dataset.edited = "1"; }
  });

  function refresh(main, every) {
    var live = document.getElementById("live");
    function tick() {
      if (document.hidden || busy()) { setTimeout(tick, every); return; }
      fetch(window.location.href, { headers: { "X-Partial": "1" }, credentials: "same-origin" })
        .then(function (r) {
          if (!r.ok) { throw new Error("HTTP " + r.status); }
          return r.text();
        })
        .then(function (html) {
          if (busy()) { return; }  // the user began on a form while the page was on its way
          main.innerHTML = html;
          localize(main);
          live.classList.remove("stale");
          live.textContent = "live";
          live.dataset.updated = String(Date.now());
        })
        .catch(function () {
          live.classList.add("stale");
          live.textContent = "offline";
        })
        .then(function () { setTimeout(tick, every); });
    }
    setTimeout(tick, every);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var main = document.getElementById("content");
    localize(document);
    var every = parseFloat(main && main.dataset.refresh) * 1000;
    if (main && every > 0) {
      refresh(main, every);
    } else {
      var live = document.getElementById("live");
      if (live) { live.hidden = true; }
    }
  });
})();
