"use strict";
// The operator console's page: sign-in, the live board, a task's timeline
// and the webhook subscriptions. Every value the server sends is put in the
// DOM as text (textContent, createElement), never parsed as HTML; the API
// key typed in is sent once and never kept.
(() => {
  const STATUSES = [
    ["todo", "To do"],
    ["in_progress", "In progress"],
    ["in_review", "In review"],
    ["blocked", "Blocked"],
    ["done", "Done"],
    ["cancelled", "Cancelled"],
  ];
  const STATUS_LABEL = new Map(STATUSES);
  const EVENT_TYPES = ["task.updated", "task.reviewed", "task.shipped", "task.awaiting_user"];
  const PAGE = 100; // cards a column shows at first, and more per "show more"
  const MAX_IDS = 100; // task IDs per board?id= request, the console's limit
  const DELIVERIES = 20; // recent deliveries shown per subscription
  const DELIVERY_READS = 4; // deliveries lists read at once
  const WEBHOOKS_REFRESH_MS = 5000;

  const $ = (id) => document.getElementById(id);

  // el returns a new element with attributes and children; strings become
  // text nodes, so nothing given here is ever parsed as HTML.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c !== null && c !== undefined && c !== false) node.append(c);
    }
    return node;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

  // timeEl returns a <time> showing the timestamp iso, or a dash.
  function timeEl(iso) {
    if (!iso) return el("span", { class: "muted" }, "—");
    const d = new Date(iso);
    return el("time", { datetime: iso, title: iso }, Number.isNaN(d.getTime()) ? String(iso) : timeFormat.format(d));
  }

  const shortSHA = (sha) => (typeof sha === "string" ? sha.slice(0, 7) : "");
  const statusLabel = (s) => STATUS_LABEL.get(s) || String(s);
  const words = (s) => String(s).replaceAll("_", " ");
  const actorText = (a) => (a && a.id ? (a.role ? `${a.id} (${a.role})` : a.id) : "—");

  // safeURL returns the URL u when its scheme is http or https, else null.
  function safeURL(u) {
    if (typeof u !== "string") return null;
    try {
      const parsed = new URL(u);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch {
      return null;
    }
  }

  // link returns an external link to u showing text, or the text alone
  // when u is not an http(s) URL.
  function link(u, text) {
    const href = safeURL(u);
    if (!href) return el("span", {}, text);
    return el("a", { href, target: "_blank", rel: "noopener noreferrer" }, text);
  }

  function badge(kind, value, text) {
    return el("span", { class: `badge ${kind}-${value}` }, text);
  }

  // idempotencyKey returns a fresh random key for one click.
  function idempotencyKey() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  // ApiError is an error answer of the console, with the API's code.
  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const state = {
    session: null, // {keyId, actor, scopes, csrfToken, expiresAt}
    generation: 0, // bumped at sign-out: late answers of an ended session are dropped
    cards: new Map(), // task ID -> card
    columns: new Map(STATUSES.map(([s]) => [s, []])), // status -> task IDs, newest first
    limits: new Map(STATUSES.map(([s]) => [s, PAGE])),
    nodes: new Map(), // task ID -> {card, node}, the rendered card
    filter: "",
    source: null, // the EventSource
    recovering: false,
    pending: new Set(), // task IDs whose cards to read again
    fetching: false,
    flushTimer: 0,
    timelineID: null,
    timelineLoading: false,
    timelineDirty: false,
    shownOnce: false,
    subs: new Map(), // subscription ID -> its rendered parts
    webhooksTimer: 0,
  };

  // api calls the console at path (relative to the page) and returns the
  // decoded answer. A 401 of a signed-in page returns to the sign-in form.
  async function api(method, path, { body, headers } = {}) {
    const h = { Accept: "application/json", ...headers };
    if (method !== "GET" && state.session) h["X-CSRF-Token"] = state.session.csrfToken;
    if (body !== undefined) h["Content-Type"] = "application/json";
    const res = await fetch(path, {
      method,
      headers: h,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
    const text = await res.text();
    let payload = null;
    if (text) {
      try {
        payload = JSON.parse(text);
      } catch {
        payload = null;
      }
    }
    if (!res.ok) {
      const e = (payload && payload.error) || {};
      const err = new ApiError(res.status, e.code || `http_${res.status}`, e.message || `${res.status} ${res.statusText}`);
      if (res.status === 401 && state.session) signedOut(`Signed out: ${err.message}`);
      throw err;
    }
    return payload;
  }

  function notice(text, kind) {
    const n = $("notice");
    n.textContent = text || "";
    n.dataset.kind = kind || "info";
    n.hidden = !text;
  }

  // ---- Session ----

  function showSignIn(message) {
    $("sign-in").hidden = false;
    $("board-view").hidden = true;
    $("webhooks-view").hidden = true;
    $("timeline").hidden = true;
    $("nav").hidden = true;
    $("who").hidden = true;
    const err = $("sign-in-error");
    err.textContent = message || "";
    err.hidden = !message;
    $("key").focus();
  }

  function signedIn(session) {
    state.session = session;
    $("who-actor").textContent = actorText(session.actor);
    const expires = $("who-expires");
    expires.dateTime = session.expiresAt;
    expires.textContent = timeFormat.format(new Date(session.expiresAt));
    $("sign-in").hidden = true;
    $("sign-in-error").hidden = true;
    $("nav").hidden = false;
    $("who").hidden = false;
    notice("");
    route();
    loadBoard().catch(() => recover());
  }

  // signedOut forgets everything of the session and shows the form.
  function signedOut(message) {
    state.generation++;
    state.session = null;
    closeStream();
    clearTimeout(state.flushTimer);
    clearTimeout(state.webhooksTimer);
    state.flushTimer = 0;
    state.pending.clear();
    state.cards.clear();
    state.nodes.clear();
    for (const ids of state.columns.values()) ids.length = 0;
    state.timelineID = null;
    state.subs.clear();
    for (const [s] of STATUSES) state.limits.set(s, PAGE);
    state.filter = "";
    $("filter").value = "";
    columnEls.clear();
    $("board").replaceChildren();
    $("total").textContent = "";
    $("subscriptions").replaceChildren();
    $("timeline-body").replaceChildren();
    setLive("off", "offline");
    showSignIn(message);
  }

  async function signIn(ev) {
    ev.preventDefault();
    const input = $("key");
    const key = input.value.trim();
    input.value = ""; // the key is sent once and kept nowhere
    if (!key) {
      showSignIn("Type an API key (lsk_…).");
      return;
    }
    const button = $("sign-in-button");
    button.disabled = true;
    try {
      const res = await api("POST", "session", { body: { key } });
      signedIn(res.data);
    } catch (e) {
      showSignIn(e.message);
    } finally {
      button.disabled = false;
    }
  }

  async function signOut() {
    try {
      await api("DELETE", "session");
    } catch (e) {
      if (e.status !== 401) {
        notice(`Signing out failed: ${e.message}`, "error");
        return;
      }
    }
    signedOut("");
  }

  // ---- Views ----

  function route() {
    if (!state.session) return;
    const webhooks = location.hash === "#webhooks";
    $("board-view").hidden = webhooks;
    $("webhooks-view").hidden = !webhooks;
    $(webhooks ? "nav-webhooks" : "nav-board").setAttribute("aria-current", "page");
    $(webhooks ? "nav-board" : "nav-webhooks").removeAttribute("aria-current");
    clearTimeout(state.webhooksTimer);
    if (webhooks) loadWebhooks();
  }

  // ---- Board ----

  // newer orders cards newest updatedAt first (timestamps are UTC RFC 3339
  // with milliseconds, so they compare as strings), then by ID.
  function newer(a, b) {
    if (a.updatedAt !== b.updatedAt) return a.updatedAt > b.updatedAt ? -1 : 1;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  }

  // position returns where card belongs in ids (sorted by newer).
  function position(ids, card) {
    let lo = 0;
    let hi = ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (newer(state.cards.get(ids[mid]), card) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  const columnEls = new Map();

  function buildColumns() {
    const board = $("board");
    board.replaceChildren();
    for (const [status, label] of STATUSES) {
      const count = el("span", { class: "count" }, "0");
      const title = el("h2", { id: `col-${status}-title` }, label, " ", count);
      const list = el("ol", { class: "cards", "aria-labelledby": `col-${status}-title` });
      const more = el("button", { type: "button", class: "more", hidden: true }, "Show more");
      more.addEventListener("click", () => {
        state.limits.set(status, state.limits.get(status) + PAGE);
        renderColumn(status);
      });
      const section = el("section", { class: "column", "data-status": status }, title, list, more);
      board.append(section);
      columnEls.set(status, { section, count, list, more });
    }
  }

  function matches(card) {
    const f = state.filter;
    if (!f) return true;
    const a = card.assignee;
    return [card.identifier, card.title, a && a.id, a && a.name].some((s) => typeof s === "string" && s.toLowerCase().includes(f));
  }

  function cardNode(card) {
    const cached = state.nodes.get(card.id);
    if (cached && cached.card === card) return cached.node;
    const node = buildCard(card);
    state.nodes.set(card.id, { card, node });
    return node;
  }

  function buildCard(c) {
    const head = el("div", { class: "card-head" },
      el("span", { class: "ident" }, c.identifier),
      el("span", { class: `prio prio-${c.priority}` }, c.priority));
    const title = el("button", { type: "button", class: "card-title", title: "Open the timeline" }, c.title);
    const meta = el("div", { class: "card-meta" });
    const a = c.assignee;
    meta.append(a ? el("span", { class: "assignee" }, a.name || a.id) : el("span", { class: "assignee muted" }, "unassigned"));
    if (c.prUrl) {
      const href = safeURL(c.prUrl);
      const text = c.prNumber ? `PR #${c.prNumber}` : "PR";
      if (href) meta.append(el("a", { class: "pr", href, target: "_blank", rel: "noopener noreferrer" }, text));
    }
    if (c.headSha) meta.append(el("code", { class: "sha", title: c.headSha }, shortSHA(c.headSha)));
    const badges = el("div", { class: "badges" });
    if (c.ci && c.ci !== "none") badges.append(badge("ci", c.ci, `CI ${words(c.ci)}`));
    if (c.prUrl || c.headSha) badges.append(badge("review", c.review, reviewLabel(c.review)));
    if (c.shipping) badges.append(badge("ship", "running", "shipping"));
    const li = el("li", { class: "card", "data-task-id": c.id, "data-status": c.status }, head, title, meta);
    if (badges.childElementCount) li.append(badges);
    if (c.blocker) li.append(el("p", { class: "blocker" }, "Blocked: ", el("span", {}, c.blocker)));
    return li;
  }

  function reviewLabel(r) {
    switch (r) {
      case "approved": return "approved";
      case "changes_requested": return "changes requested";
      case "not_required": return "review not required";
      case "pending": return "review pending";
      default: return words(r || "no review");
    }
  }

  // reconcile makes list's children exactly nodes, moving as little as it
  // can (so focus and scrolling survive an update).
  function reconcile(list, nodes) {
    let cur = list.firstChild;
    for (const n of nodes) {
      if (n === cur) {
        cur = cur.nextSibling;
        continue;
      }
      list.insertBefore(n, cur);
    }
    while (cur) {
      const next = cur.nextSibling;
      cur.remove();
      cur = next;
    }
  }

  function renderColumn(status) {
    const col = columnEls.get(status);
    const ids = state.columns.get(status);
    const limit = state.limits.get(status);
    const shown = [];
    let total = ids.length;
    if (state.filter) {
      total = 0;
      for (const id of ids) {
        const card = state.cards.get(id);
        if (!matches(card)) continue;
        if (total++ < limit) shown.push(cardNode(card));
      }
    } else {
      for (let i = 0; i < ids.length && i < limit; i++) shown.push(cardNode(state.cards.get(ids[i])));
    }
    reconcile(col.list, shown);
    col.count.textContent = state.filter ? `${total} of ${ids.length}` : String(ids.length);
    const hidden = total - shown.length;
    col.more.hidden = hidden <= 0;
    col.more.textContent = `Show ${Math.min(PAGE, hidden)} more (${hidden} not shown)`;
  }

  function renderBoard() {
    if (columnEls.size === 0) buildColumns();
    for (const [status] of STATUSES) renderColumn(status);
    $("total").textContent = `${state.cards.size} tasks`;
  }

  // removeFromColumn takes id, whose card was old, out of its column.
  function removeFromColumn(id, old) {
    const ids = state.columns.get(old.status);
    if (!ids) return;
    let i = position(ids, old);
    if (ids[i] !== id) i = ids.indexOf(id);
    if (i >= 0) ids.splice(i, 1);
  }

  // replaceCards puts the whole board in place of the cards held.
  function replaceCards(list) {
    state.cards.clear();
    for (const ids of state.columns.values()) ids.length = 0;
    for (const card of list) {
      state.cards.set(card.id, card);
      const ids = state.columns.get(card.status);
      if (ids) ids.push(card.id);
    }
    for (const ids of state.columns.values()) ids.sort((a, b) => newer(state.cards.get(a), state.cards.get(b)));
    for (const id of state.nodes.keys()) {
      if (state.cards.get(id) !== state.nodes.get(id).card) state.nodes.delete(id);
    }
  }

  // applyCards updates, inserts or moves the cards read for asked, and
  // drops those of asked that are gone; a card never goes back in version.
  function applyCards(asked, list) {
    const dirty = new Set();
    const got = new Set();
    for (const card of list) {
      got.add(card.id);
      const old = state.cards.get(card.id);
      if (old && old.version > card.version) continue;
      if (old) {
        removeFromColumn(card.id, old);
        dirty.add(old.status);
      }
      state.cards.set(card.id, card);
      const ids = state.columns.get(card.status);
      if (ids) ids.splice(position(ids, card), 0, card.id);
      dirty.add(card.status);
    }
    for (const id of asked) {
      const old = state.cards.get(id);
      if (got.has(id) || !old) continue;
      removeFromColumn(id, old);
      state.cards.delete(id);
      state.nodes.delete(id);
      dirty.add(old.status);
    }
    for (const status of dirty) if (columnEls.has(status)) renderColumn(status);
    $("total").textContent = `${state.cards.size} tasks`;
  }

  // markShown records, once per page load, when the board was first on
  // screen: the frame after it was built.
  function markShown() {
    if (state.shownOnce) return;
    state.shownOnce = true;
    requestAnimationFrame(() => setTimeout(() => performance.mark("console:board-shown"), 0));
  }

  async function loadBoard() {
    const gen = state.generation;
    closeStream();
    setLive("loading", "loading…");
    const res = await api("GET", "board");
    if (gen !== state.generation) return;
    replaceCards(res.data);
    renderBoard();
    markShown();
    openStream(res.cursor);
    if (state.timelineID) queueTimeline();
  }

  function setLive(kind, text) {
    const live = $("live");
    live.dataset.state = kind;
    live.textContent = text;
  }

  // ---- Live updates ----

  function closeStream() {
    if (state.source) {
      state.source.close();
      state.source = null;
    }
  }

  // openStream follows the events after cursor (the live tail without
  // one). EventSource reconnects by itself, with Last-Event-ID, after a
  // network failure; an answer that ends it for good (an expired cursor,
  // a signed-out session, a server shutting down) reloads the board.
  function openStream(cursor) {
    closeStream();
    const url = "api/task-events/stream" + (cursor ? `?cursor=${encodeURIComponent(cursor)}` : "");
    const es = new EventSource(url);
    state.source = es;
    es.onopen = () => {
      if (state.source === es) setLive("live", "live");
    };
    es.onerror = () => {
      if (state.source !== es) return;
      if (es.readyState === EventSource.CLOSED) {
        state.source = null;
        recover();
      } else {
        setLive("reconnecting", "reconnecting…");
      }
    };
    for (const type of EVENT_TYPES) es.addEventListener(type, onEvent);
  }

  function onEvent(m) {
    let env;
    try {
      env = JSON.parse(m.data);
    } catch {
      return;
    }
    const id = env && env.data && env.data.taskId;
    if (typeof id !== "string") return;
    state.pending.add(id);
    scheduleFlush(0);
    if (id === state.timelineID) queueTimeline();
  }

  // recover checks the session (a 401 shows the sign-in form) and loads
  // the board and the stream again, waiting longer after each failure.
  async function recover() {
    if (state.recovering) return;
    state.recovering = true;
    const gen = state.generation;
    setLive("reconnecting", "reconnecting…");
    try {
      for (let delay = 1000; gen === state.generation; delay = Math.min(2 * delay, 30000)) {
        try {
          await api("GET", "session");
          if (gen !== state.generation) return;
          await loadBoard();
          return;
        } catch (e) {
          if (e.status === 401) return;
          setLive("reconnecting", `reconnecting… (${e.message})`);
        }
        await sleep(delay);
      }
    } finally {
      state.recovering = false;
    }
  }

  function scheduleFlush(ms) {
    if (state.fetching || state.flushTimer) return;
    state.flushTimer = setTimeout(flush, ms);
  }

  // flush reads the cards of the tasks that changed, up to MAX_IDS at a
  // time; changes that arrive meanwhile are read by the next request.
  async function flush() {
    state.flushTimer = 0;
    if (state.fetching || state.pending.size === 0 || !state.session) return;
    const ids = [];
    for (const id of state.pending) {
      ids.push(id);
      if (ids.length === MAX_IDS) break;
    }
    for (const id of ids) state.pending.delete(id);
    const gen = state.generation;
    state.fetching = true;
    let retry = 0;
    try {
      const res = await api("GET", "board?" + ids.map((id) => `id=${encodeURIComponent(id)}`).join("&"));
      if (gen === state.generation) applyCards(ids, res.data);
    } catch (e) {
      if (gen === state.generation && e.status !== 401) {
        for (const id of ids) state.pending.add(id);
        retry = 1000;
      }
    } finally {
      state.fetching = false;
    }
    if (gen === state.generation && state.pending.size) scheduleFlush(retry);
  }

  // ---- Timeline ----

  function openTimeline(id) {
    state.timelineID = id;
    const card = state.cards.get(id);
    $("timeline-title").textContent = card ? `${card.identifier}: ${card.title}` : "Timeline";
    $("timeline-body").replaceChildren(el("p", { class: "muted" }, "Loading…"));
    $("timeline").hidden = false;
    $("timeline-close").focus();
    queueTimeline();
  }

  function closeTimeline() {
    const id = state.timelineID;
    state.timelineID = null;
    $("timeline").hidden = true;
    $("timeline-body").replaceChildren();
    const back = id && document.querySelector(`.card[data-task-id="${CSS.escape(id)}"] .card-title`);
    if (back) back.focus();
  }

  // queueTimeline reads the open timeline again, once at a time.
  async function queueTimeline() {
    if (state.timelineLoading) {
      state.timelineDirty = true;
      return;
    }
    const id = state.timelineID;
    if (!id) return;
    state.timelineLoading = true;
    state.timelineDirty = false;
    const gen = state.generation;
    try {
      const res = await api("GET", `timeline/${encodeURIComponent(id)}`);
      if (gen === state.generation && state.timelineID === id) renderTimeline(res.data);
    } catch (e) {
      if (gen === state.generation && state.timelineID === id && e.status !== 401) {
        $("timeline-body").replaceChildren(el("p", { class: "error" }, `The timeline could not be read: ${e.message}`));
      }
    } finally {
      state.timelineLoading = false;
    }
    if (state.timelineDirty && state.timelineID) queueTimeline();
  }

  function facts(pairs) {
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of pairs) {
      if (v === null || v === undefined || v === "") continue;
      dl.append(el("dt", {}, k), el("dd", {}, v));
    }
    return dl;
  }

  function renderTimeline(t) {
    const task = t.task;
    const card = t.card;
    $("timeline-title").textContent = `${task.identifier}: ${task.title}`;
    const body = [];

    const summary = facts([
      ["Status", badge("status", card.status, statusLabel(card.status))],
      ["Priority", card.priority],
      ["Assignee", card.assignee ? card.assignee.name || card.assignee.id : "unassigned"],
      ["Project", card.project],
      ["Pull request", card.prUrl ? link(card.prUrl, card.prNumber ? `#${card.prNumber}` : card.prUrl) : null],
      ["Head", card.headSha ? el("code", {}, card.headSha) : null],
      ["Updated", timeEl(card.updatedAt)],
    ]);
    body.push(summary);
    if (task.blocker) {
      const b = task.blocker;
      body.push(el("div", { class: "blocker-box" },
        el("h3", {}, "Blocked: ", el("span", {}, b.reason)),
        el("p", { class: "pre" }, b.actionRequired || ""),
        b.resumeInstructions ? el("p", { class: "muted pre" }, b.resumeInstructions) : null));
    }

    body.push(el("h3", {}, `Events (${t.events.length})`));
    const events = el("ol", { class: "events" });
    for (const ev of t.events) events.append(eventItem(ev));
    if (t.events.length === 0) events.append(el("li", { class: "muted" }, "No events stored (they are kept 72 hours)."));
    body.push(events);

    body.push(el("h3", {}, `Submissions (${t.submissions.length})`));
    if (t.submissions.length === 0) body.push(el("p", { class: "muted" }, "Not submitted yet."));
    for (const s of t.submissions) body.push(submissionItem(s));

    body.push(el("h3", {}, "CI of the head"));
    body.push(ciSection(t.ci));

    body.push(el("h3", {}, `Ship operations (${t.shipOperations.length})`));
    if (t.shipOperations.length === 0) body.push(el("p", { class: "muted" }, "Not shipped."));
    for (const op of t.shipOperations) body.push(shipItem(op));

    $("timeline-body").replaceChildren(...body);
  }

  function eventItem(ev) {
    const d = ev.data || {};
    const meta = [];
    if ("previousStatus" in d && d.previousStatus !== d.status) {
      meta.push(d.previousStatus ? `${statusLabel(d.previousStatus)} → ${statusLabel(d.status)}` : `created in ${statusLabel(d.status)}`);
    }
    if (d.actor) meta.push(`by ${actorText(d.actor)}`);
    if (d.reviewOutcome) meta.push(`${words(d.reviewOutcome)} by ${actorText(d.reviewer)}`);
    if (d.shipStatus) meta.push(`ship ${d.shipStatus} (${d.targetEnvironment})`);
    if (d.blocker) meta.push(`blocker ${d.blocker.reason}: ${d.blocker.actionRequired}`);
    // A creation changes every field it sets: listing them says nothing.
    if (d.previousStatus !== null && Array.isArray(d.changedFields) && d.changedFields.length) meta.push(`changed ${d.changedFields.join(", ")}`);
    return el("li", { class: "event", "data-type": ev.type },
      el("div", { class: "event-head" },
        el("span", { class: "event-type" }, ev.type), " ", timeEl(ev.occurredAt),
        el("span", { class: "muted seq" }, `v${ev.taskVersion} · #${ev.sequence}`)),
      el("p", { class: "event-summary" }, d.summary || ""),
      meta.length ? el("p", { class: "event-meta" }, meta.join(" · ")) : null);
  }

  function submissionItem(s) {
    const reviews = el("ul", { class: "reviews" });
    for (const r of s.reviews) {
      reviews.append(el("li", { class: "review" },
        el("div", {}, badge("review", r.outcome, words(r.outcome)), " by ", el("strong", {}, actorText(r.reviewer)), " ", timeEl(r.submittedAt)),
        r.body ? el("p", { class: "pre" }, r.body) : null));
    }
    if (s.reviews.length === 0) reviews.append(el("li", { class: "muted" }, "No reviews yet."));
    return el("div", { class: "submission" },
      el("div", { class: "submission-head" },
        link(s.prUrl, s.prNumber ? `PR #${s.prNumber}` : "pull request"), " ",
        el("span", { class: "muted" }, words(s.action)), " ",
        s.headSha ? el("code", {}, shortSHA(s.headSha)) : null, " ", timeEl(s.acceptedAt)),
      el("p", { class: "pre" }, s.summary || ""),
      s.notes ? el("p", { class: "muted pre" }, s.notes) : null,
      facts([["By", actorText(s.actor)], ["Review policy", words(s.codeReviewPolicy || "")]]),
      reviews);
  }

  function ciSection(ci) {
    const wrap = el("div", { class: "ci" },
      el("p", {}, badge("ci", ci.overall, `CI ${words(ci.overall)}`), " ",
        ci.headSha ? el("code", {}, shortSHA(ci.headSha)) : null, " ",
        ci.provider ? el("span", { class: "muted" }, `from ${ci.provider}`) : null));
    if (!ci.checks || ci.checks.length === 0) {
      wrap.append(el("p", { class: "muted" }, "No checks for this head."));
      return wrap;
    }
    const rows = ci.checks.map((c) => el("tr", {},
      el("td", {}, c.url ? link(c.url, c.name) : c.name),
      el("td", {}, badge("check", c.status, c.status)),
      el("td", { class: "muted" }, words(c.source || ""))));
    wrap.append(el("table", { class: "table" },
      el("thead", {}, el("tr", {}, el("th", {}, "Check"), el("th", {}, "Status"), el("th", {}, "Source"))),
      el("tbody", {}, ...rows)));
    return wrap;
  }

  function shipItem(op) {
    const dep = op.deployment;
    return el("div", { class: `ship ship-${op.status}` },
      el("div", { class: "submission-head" },
        badge("ship", op.status, op.status), " ", words(op.mode), " to ", el("strong", {}, op.targetEnvironment), " ",
        timeEl(op.finishedAt || op.startedAt || op.queuedAt)),
      facts([
        ["Operation", el("code", {}, op.operationId)],
        ["Expected head", el("code", {}, shortSHA(op.expectedHeadSha))],
        ["Merge commit", op.mergeCommitSha ? el("code", {}, shortSHA(op.mergeCommitSha)) : null],
        ["Deployment", dep ? link(dep.url, dep.url || dep.id) : null],
      ]),
      op.error ? el("p", { class: "error" }, el("code", {}, op.error.code), " ", op.error.message) : null,
      op.wait ? el("p", { class: "muted" }, el("code", {}, op.wait.reason), " ", op.wait.message, " ", timeEl(op.wait.until)) : null);
  }

  // ---- Webhooks ----

  // mapLimit calls fn on every item, at most limit at a time, and resolves
  // to the results in the items' order.
  async function mapLimit(items, limit, fn) {
    const out = new Array(items.length);
    let next = 0;
    const worker = async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]);
      }
    };
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
    return out;
  }

  async function loadWebhooks() {
    clearTimeout(state.webhooksTimer);
    const gen = state.generation;
    const status = $("webhooks-status");
    try {
      const subs = [];
      let cursor = null;
      do {
        const res = await api("GET", "api/event-subscriptions?limit=200" + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""));
        subs.push(...res.data);
        cursor = res.nextCursor;
      } while (cursor && subs.length < 1000);
      if (gen !== state.generation) return;
      // A few reads at a time, however many subscriptions there are.
      const deliveries = await mapLimit(subs, DELIVERY_READS, (s) =>
        api("GET", `api/event-subscriptions/${encodeURIComponent(s.id)}/deliveries?limit=${DELIVERIES}`).then((r) => r.data, (e) => e));
      if (gen !== state.generation) return;
      renderWebhooks(subs, deliveries);
      status.textContent = `${subs.length} subscription${subs.length === 1 ? "" : "s"}, read ${timeFormat.format(new Date())}`;
    } catch (e) {
      if (gen !== state.generation) return;
      status.textContent = `The subscriptions could not be read: ${e.message}`;
    }
    if (gen === state.generation && !$("webhooks-view").hidden) {
      state.webhooksTimer = setTimeout(loadWebhooks, WEBHOOKS_REFRESH_MS);
    }
  }

  function renderWebhooks(subs, deliveries) {
    const list = $("subscriptions");
    const seen = new Set();
    const nodes = [];
    subs.forEach((sub, i) => {
      seen.add(sub.id);
      let parts = state.subs.get(sub.id);
      if (!parts) {
        parts = buildSubscription(sub.id);
        state.subs.set(sub.id, parts);
      }
      updateSubscription(parts, sub, deliveries[i]);
      nodes.push(parts.node);
    });
    for (const id of state.subs.keys()) if (!seen.has(id)) state.subs.delete(id);
    if (subs.length === 0) nodes.push(el("p", { class: "muted" }, "No subscriptions. Create one with POST /event-subscriptions (see docs/api.md)."));
    reconcile(list, nodes);
  }

  // buildSubscription builds the parts of a subscription that stay while
  // it is refreshed (so a sequence being typed is not lost).
  function buildSubscription(id) {
    const p = {};
    p.url = el("span", { class: "sub-url" });
    p.status = el("span", {});
    p.info = el("div", {});
    p.result = el("p", { class: "result", role: "status" });
    const inputID = `replay-${id}`;
    p.seq = el("input", { id: inputID, type: "number", min: "0", step: "1", inputmode: "numeric", class: "seq-input", placeholder: "0" });
    p.replay = el("button", { type: "button", class: "replay" }, "Replay");
    p.replay.addEventListener("click", () => replay(id, p));
    p.enable = el("button", { type: "button", class: "enable", hidden: true }, "Enable");
    p.enable.addEventListener("click", () => enable(id, p));
    p.deliveries = el("div", { class: "deliveries" });
    const controls = el("div", { class: "controls" },
      el("label", { for: inputID }, "Replay the events after sequence"), p.seq, p.replay, p.enable);
    p.node = el("article", { class: "sub", "data-subscription-id": id },
      el("header", { class: "sub-head" }, p.url, p.status), p.info, controls, p.result, p.deliveries);
    return p;
  }

  function updateSubscription(p, sub, deliveries) {
    p.url.textContent = sub.url;
    p.status.replaceChildren(badge("sub", sub.status, sub.status));
    p.enable.hidden = sub.status !== "disabled";
    const f = sub.filters || {};
    const filters = [];
    if (f.projects && f.projects.length) filters.push(`projects: ${f.projects.join(", ")}`);
    if (f.taskIds && f.taskIds.length) filters.push(`tasks: ${f.taskIds.join(", ")}`);
    p.info.replaceChildren(facts([
      ["ID", el("code", {}, sub.id)],
      ["Description", sub.description],
      ["Events", sub.eventTypes.join(", ")],
      ["Filters", filters.length ? filters.join("; ") : "none"],
      ["Created", timeEl(sub.createdAt)],
    ]));
    if (deliveries instanceof Error) {
      p.deliveries.replaceChildren(el("p", { class: "error" }, `Deliveries could not be read: ${deliveries.message}`));
      return;
    }
    if (deliveries.length === 0) {
      p.deliveries.replaceChildren(el("p", { class: "muted" }, "No deliveries yet."));
      return;
    }
    // Only the last attempt of a chain can be retried: a pending one, or a
    // failed one with no next attempt (a failed attempt with nextAttemptAt
    // was followed by another, and answers 409 delivery_superseded).
    const rows = deliveries.map((d) => {
      let action = null;
      if (d.status === "pending" || (d.status === "failed" && !d.nextAttemptAt)) {
        action = el("button", { type: "button", class: "retry" }, "Retry now");
        action.addEventListener("click", () => retry(sub.id, d.deliveryId, p, action));
      }
      return el("tr", { "data-delivery-id": d.deliveryId, "data-event-id": d.eventId },
        el("td", {}, el("code", { title: d.deliveryId }, d.eventId)),
        el("td", {}, badge("delivery", d.status, d.status)),
        el("td", { class: "num" }, String(d.attempt)),
        el("td", { class: "num" }, d.responseStatus === null || d.responseStatus === undefined ? "—" : String(d.responseStatus)),
        el("td", { class: "error-cell" }, d.error || ""),
        el("td", {}, timeEl(d.attemptedAt)),
        el("td", {}, timeEl(d.nextAttemptAt)),
        el("td", {}, action));
    });
    p.deliveries.replaceChildren(el("table", { class: "table" },
      el("caption", {}, `Recent deliveries (newest first, up to ${DELIVERIES})`),
      el("thead", {}, el("tr", {}, ...["Event", "Status", "Attempt", "Response", "Error", "Attempted", "Next attempt", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows)));
  }

  function showResult(p, text, ok) {
    p.result.textContent = text;
    p.result.dataset.kind = ok ? "ok" : "error";
  }

  async function replay(id, p) {
    const n = p.seq.valueAsNumber;
    if (!Number.isInteger(n) || n < 0) {
      showResult(p, "Type a sequence number, 0 or more: the events after it are delivered again.", false);
      return;
    }
    p.replay.disabled = true;
    try {
      const res = await api("POST", `api/event-subscriptions/${encodeURIComponent(id)}/replay`, {
        body: { fromSequence: n },
        headers: { "Idempotency-Key": idempotencyKey() },
      });
      const r = res.data;
      showResult(p, `202 Accepted: the events after sequence ${r.fromSequence} through ${r.throughSequence} are being delivered again.`, true);
      setTimeout(loadWebhooks, 1000);
    } catch (e) {
      showResult(p, `${e.status} ${e.code}: ${e.message}`, false);
    } finally {
      p.replay.disabled = false;
    }
  }

  async function retry(subID, deliveryID, p, button) {
    button.disabled = true;
    try {
      const res = await api("POST", `api/event-subscriptions/${encodeURIComponent(subID)}/deliveries/${encodeURIComponent(deliveryID)}/retry`);
      showResult(p, `202 Accepted: the next attempt at ${res.data.eventId} is made now.`, true);
      setTimeout(loadWebhooks, 1000);
    } catch (e) {
      showResult(p, `${e.status} ${e.code}: ${e.message}`, false);
      button.disabled = false;
    }
  }

  async function enable(id, p) {
    p.enable.disabled = true;
    try {
      await api("POST", `api/event-subscriptions/${encodeURIComponent(id)}/enable`);
      showResult(p, "Enabled: delivery resumes after the last event recorded before the disabling.", true);
      loadWebhooks();
    } catch (e) {
      showResult(p, `${e.status} ${e.code}: ${e.message}`, false);
    } finally {
      p.enable.disabled = false;
    }
  }

  // ---- Wiring ----

  function start() {
    $("sign-in-form").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", signOut);
    $("timeline-close").addEventListener("click", closeTimeline);
    $("webhooks-refresh").addEventListener("click", loadWebhooks);
    window.addEventListener("hashchange", route);
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && state.timelineID) closeTimeline();
    });
    $("board").addEventListener("click", (ev) => {
      if (ev.target.closest("a, .more")) return;
      const card = ev.target.closest(".card");
      if (card) openTimeline(card.dataset.taskId);
    });
    let filterTimer = 0;
    $("filter").addEventListener("input", () => {
      clearTimeout(filterTimer);
      filterTimer = setTimeout(() => {
        state.filter = $("filter").value.trim().toLowerCase();
        for (const [s] of STATUSES) state.limits.set(s, PAGE);
        if (columnEls.size) for (const [s] of STATUSES) renderColumn(s);
      }, 120);
    });
    window.addEventListener("unhandledrejection", (ev) => {
      notice(`Something failed: ${ev.reason && ev.reason.message ? ev.reason.message : ev.reason}`, "error");
    });
    api("GET", "session").then(
      (res) => signedIn(res.data),
      (e) => showSignIn(e.status === 401 ? "" : `The console could not be reached: ${e.message}`));
  }

  start();
})();
