// prism serve: relative times, live run pages (server-sent events), the inbox's forms.
// No inline script anywhere: the Content-Security-Policy allows only this file.
"use strict";

(function () {
  const csrf = () => {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  };

  // ------------------------------------------------------------ relative times
  function relative(iso) {
    const when = Date.parse(iso);
    if (Number.isNaN(when)) return null;
    const s = (Date.now() - when) / 1000;
    if (s < 45) return "just now";
    if (s < 3600) return Math.max(1, Math.round(s / 60)) + " min ago";
    if (s < 86400) return Math.round(s / 3600) + " h ago";
    if (s < 86400 * 30) return Math.round(s / 86400) + " d ago";
    return iso.slice(0, 10);
  }
  function refreshTimes(root) {
    (root || document).querySelectorAll("time[data-rel]").forEach((el) => {
      const text = relative(el.getAttribute("datetime"));
      if (text === null) return;
      el.textContent = el.hasAttribute("data-rel-bare") ? text.replace(" ago", "") : text;
    });
  }
  setInterval(refreshTimes, 30000);

  // ------------------------------------------------------------ live run page
  function keepOpen(container, html) {
    const open = new Set();
    container.querySelectorAll("details[open][id]").forEach((d) => open.add(d.id));
    const focused = document.activeElement && document.activeElement.id;
    container.innerHTML = html; // server-rendered, autoescaped HTML of this origin
    open.forEach((id) => {
      const d = document.getElementById(id);
      if (d) d.open = true;
    });
    if (focused) {
      const el = document.getElementById(focused);
      if (el) el.focus();
    }
    refreshTimes(container);
  }

  function liveRun() {
    const box = document.getElementById("run-live");
    const panels = document.getElementById("run-panels");
    if (!box || !panels || box.hidden || !window.EventSource) return;
    const status = document.getElementById("live-status");
    let pending = null;
    let busy = false;
    const reload = async () => {
      if (busy) { pending = true; return; }
      busy = true;
      try {
        const res = await fetch(box.dataset.panels, { headers: { Accept: "text/html" }, credentials: "same-origin" });
        if (res.ok) {
          keepOpen(panels, await res.text());
          status.textContent = "Updated " + new Date().toLocaleTimeString() + ".";
        }
      } finally {
        busy = false;
        if (pending) { pending = null; reload(); }
      }
    };
    const source = new EventSource(box.dataset.stream);
    source.addEventListener("open", () => box.classList.add("connected"));
    source.addEventListener("update", (event) => {
      let data = {};
      try { data = JSON.parse(event.data); } catch (e) { /* keep going */ }
      box.dataset.lastStatus = data.status || "";
      reload();
    });
    source.addEventListener("end", () => {
      source.close();
      box.classList.remove("connected");
      box.classList.add("ended");
      reload().then(() => { status.textContent = "The run has ended; this page is final."; });
    });
    source.addEventListener("error", () => {
      status.textContent = "Connection lost; retrying…";
    });
  }

  // ------------------------------------------------------------ inbox
  function setResult(el, tone, text) {
    if (!el) return;
    el.className = el.className.replace(/\btone-\w+/g, "").trim() + " tone-" + tone;
    el.textContent = text;
  }

  // the nav's pending count: hidden at zero
  function currentCount() {
    const counter = document.getElementById("inbox-count");
    const n = counter && counter.firstChild ? parseInt(counter.firstChild.textContent, 10) : 0;
    return Number.isNaN(n) ? 0 : n;
  }
  function setCount(count) {
    const counter = document.getElementById("inbox-count");
    if (!counter || !counter.firstChild) return;
    counter.firstChild.textContent = count >= 200 ? "200+" : String(count);
    counter.hidden = count === 0;
  }

  function wireDecision(form) {
    if (form.dataset.wired) return;
    form.dataset.wired = "1";
    const textarea = form.querySelector("textarea[name=arguments]");
    const check = textarea ? document.getElementById(textarea.getAttribute("aria-describedby")) : null;
    const result = form.querySelector(".result");
    let timer = null;
    const validate = async () => {
      const body = new FormData(form);
      const res = await fetch(form.dataset.validate, {
        method: "POST", body, headers: { Accept: "application/json" }, credentials: "same-origin",
      });
      const data = await res.json().catch(() => ({ ok: false, problems: ["The check failed."] }));
      textarea.setAttribute("aria-invalid", data.ok ? "false" : "true");
      check.classList.toggle("ok", !!data.ok);
      check.classList.toggle("bad", !data.ok);
      check.textContent = data.ok
        ? (data.schema ? "Valid against the tool's schema." : "Valid JSON object (the tool's schema is not known here).")
        : data.problems.join(" ");
      return !!data.ok;
    };
    if (textarea && check) {
      textarea.addEventListener("input", () => {
        const box = form.querySelector("input[name=edit]");
        if (box) box.checked = true;
        clearTimeout(timer);
        timer = setTimeout(validate, 250);
      });
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button[type=submit]");
      button.disabled = true;
      setResult(result, "idle", "Deciding…");
      try {
        const res = await fetch(form.action, {
          method: "POST", body: new FormData(form), headers: { Accept: "application/json" }, credentials: "same-origin",
        });
        const data = await res.json().catch(() => ({ ok: false, title: "The server did not answer", detail: "", tone: "bad" }));
        setResult(result, data.tone || (data.ok ? "ok" : "bad"), data.title + (data.detail ? " — " + data.detail : ""));
        if (data.ok) {
          const card = form.closest(".card");
          if (card) {
            card.classList.add("decided");
            const badge = card.querySelector(".badge.state");
            if (badge && data.outcome) {
              badge.className = "badge state tone-" + (data.outcome_tone || "ok");
              badge.textContent = data.outcome;
            }
          }
          if (data.kind !== "lost") setCount(Math.max(0, currentCount() - 1));
          form.querySelectorAll("input, textarea, button, select").forEach((el) => { el.disabled = true; });
        } else {
          button.disabled = false;
        }
      } catch (e) {
        setResult(result, "bad", "The request failed; nothing was decided.");
        button.disabled = false;
      }
    });
  }

  function liveInbox() {
    const box = document.getElementById("inbox-live");
    const list = document.getElementById("inbox-cards");
    document.querySelectorAll("form.decide").forEach(wireDecision);
    if (!box || !list || !window.EventSource) return;
    const status = document.getElementById("inbox-status");
    const refresh = document.getElementById("inbox-refresh");
    let shown = box.dataset.ids || "";
    const busy = () => {
      const active = document.activeElement;
      if (active && list.contains(active) && active.matches("input, textarea, select")) return true;
      return Array.from(list.querySelectorAll("form.decide")).some((f) =>
        f.querySelector("textarea[aria-invalid]") || (f.reason && f.reason.value) || f.closest(".decided"));
    };
    const load = async () => {
      const res = await fetch(box.dataset.list, { headers: { Accept: "text/html" }, credentials: "same-origin" });
      if (!res.ok) return;
      keepOpen(list, await res.text());
      list.querySelectorAll("form.decide").forEach(wireDecision);
      refresh.hidden = true;
    };
    refresh.addEventListener("click", () => { load().then(() => { if (box.dataset.pendingIds !== undefined) shown = box.dataset.pendingIds; }); });
    const source = new EventSource(box.dataset.stream);
    source.addEventListener("open", () => box.classList.add("connected"));
    source.addEventListener("changed", (event) => {
      let data = { count: 0, ids: [] };
      try { data = JSON.parse(event.data); } catch (e) { return; }
      const ids = data.ids.join(" ");
      box.dataset.pendingIds = ids;
      setCount(data.count);
      if (ids === shown) return;
      status.textContent = data.count === 0 ? "No pending decisions."
        : data.count + " pending decision" + (data.count === 1 ? "" : "s") + ".";
      // a new call to decide: offer the new list while a form is in use; one that left
      // (decided here or elsewhere) needs no prompt, the decided card says what happened
      const before = new Set(shown.split(" ").filter(Boolean));
      const added = data.ids.some((id) => !before.has(id));
      if (busy()) {
        if (added) refresh.hidden = false;
        else if (data.count === 0) refresh.hidden = true;
      } else {
        shown = ids;
        load();
      }
    });
    source.addEventListener("error", () => { status.textContent = "Connection lost; retrying…"; });
  }

  document.addEventListener("DOMContentLoaded", () => {
    refreshTimes();
    liveRun();
    liveInbox();
  });
})();
