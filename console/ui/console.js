"use strict";
// The operator console's page: sign-in, the live board (with stalled and
// waiting tasks highlighted), a task's timeline and the operator's actions
// on it, the merge queues and the webhook subscriptions. Every value the server sends is put in the
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
  const EVENT_TYPES = ["task.updated", "task.reviewed", "task.shipped", "task.awaiting_user", "task.merge_queue",
    "task.stalled", "task.ci_failed"];
  const MAX_REASON = 2000; // characters of a cancel reason or a blocker's resolution, the API's limit
  const QUEUE_EVENT = "task.merge_queue";
  const QUEUES_EVERY_MS = 500; // the merge queues are read at most this often
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
    constructor(status, code, message, details) {
      super(message);
      this.status = status;
      this.code = code;
      this.details = details || {};
    }
  }

  // errorText is how the page shows a refusal: its status, code and, for
  // a conflict, its reason, then the API's message.
  function errorText(e) {
    if (!(e instanceof ApiError)) return String(e && e.message ? e.message : e);
    const reason = e.details && typeof e.details.reason === "string" ? ` (${e.details.reason})` : "";
    return `${e.status} ${e.code}${reason}: ${e.message}`;
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
    actCard: null, // the card of the task whose actions are shown
    actLastOp: undefined, // its latest ship operation; null: none; undefined: not read yet
    actBusy: false, // an action's request is under way
    shownOnce: false,
    subs: new Map(), // subscription ID -> its rendered parts
    webhooksTimer: 0,
    queues: new Map(), // merge queue ID -> its rendered parts
    queued: new Map(), // task ID -> {queueId, key, label, state}: its change waits in a merge queue
    queuesTimer: 0,
    queuesLoading: false,
    queuesDirty: false, // a change arrived while the queues were being read
    queuesReadAt: -Infinity, // performance.now() of the last read
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
      const err = new ApiError(res.status, e.code || `http_${res.status}`, e.message || `${res.status} ${res.statusText}`, e.details);
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
    $("queues-view").hidden = true;
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
    clearTimeout(state.queuesTimer);
    state.flushTimer = 0;
    state.queuesTimer = 0;
    state.queuesLoading = false;
    state.queuesDirty = false;
    state.queuesReadAt = -Infinity;
    state.queues.clear();
    state.queued.clear();
    state.pending.clear();
    state.cards.clear();
    state.nodes.clear();
    for (const ids of state.columns.values()) ids.length = 0;
    state.timelineID = null;
    state.actBusy = false;
    resetActions();
    state.subs.clear();
    for (const [s] of STATUSES) state.limits.set(s, PAGE);
    state.filter = "";
    $("filter").value = "";
    columnEls.clear();
    $("board").replaceChildren();
    $("total").textContent = "";
    $("highlights").hidden = true;
    $("subscriptions").replaceChildren();
    $("queues").replaceChildren();
    $("queues-status").textContent = "";
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

  const VIEWS = ["board", "queues", "webhooks"];

  function route() {
    if (!state.session) return;
    const hash = location.hash.slice(1);
    const view = VIEWS.includes(hash) ? hash : "board";
    for (const v of VIEWS) {
      $(`${v}-view`).hidden = v !== view;
      if (v === view) $(`nav-${v}`).setAttribute("aria-current", "page");
      else $(`nav-${v}`).removeAttribute("aria-current");
    }
    clearTimeout(state.webhooksTimer);
    if (view === "webhooks") loadWebhooks();
    if (view === "queues") loadQueues();
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
    const q = state.queued.get(c.id);
    if (q) badges.append(el("span", { class: `badge queue-${q.state}`, "data-queue-id": q.queueId, title: q.title }, q.label));
    const stalled = stalledOf(c);
    const waiting = waitingOf(c);
    const li = el("li", { class: `card${stalled ? " stalled" : ""}${waiting.length ? " waiting" : ""}`, "data-task-id": c.id, "data-status": c.status,
      "data-stalled": stalled ? "true" : null, "data-waiting": waiting.length ? "true" : null }, head, title, meta);
    if (badges.childElementCount) li.append(badges);
    if (c.blocker) li.append(el("p", { class: "blocker" }, "Blocked: ", el("span", {}, c.blocker)));
    if (stalled) li.append(stalledNote(stalled));
    if (waiting.length) li.append(waitingNote(waiting));
    return li;
  }

  // stalledOf returns a task's stalled member ({since, lastActivityAt})
  // or null; a Service that serves none has none.
  const stalledOf = (t) => (t && t.stalled && typeof t.stalled === "object" ? t.stalled : null);

  // waitingOf returns the IDs of the tasks a task waits for, [] when none
  // or when the Service serves no waitingOn.
  const waitingOf = (t) => (t && Array.isArray(t.waitingOn) ? t.waitingOn.filter((id) => typeof id === "string") : []);

  function stalledNote(st) {
    return el("p", { class: "stalled-note" }, "Stalled since ", timeEl(st.since),
      st.lastActivityAt ? el("span", { class: "muted" }, " · last activity ", timeEl(st.lastActivityAt)) : null);
  }

  function waitingNote(ids) {
    return el("p", { class: "waiting-note" }, "Waiting on ", taskLinks(ids));
  }

  // countHighlights shows how many tasks on the board are stalled and
  // how many wait for others.
  function countHighlights() {
    let stalled = 0;
    let waiting = 0;
    for (const c of state.cards.values()) {
      if (c.stalled && typeof c.stalled === "object") stalled++;
      if (Array.isArray(c.waitingOn) && c.waitingOn.length) waiting++;
    }
    const h = $("highlights");
    const parts = [];
    if (stalled) parts.push(`${stalled} stalled`);
    if (waiting) parts.push(`${waiting} waiting`);
    h.textContent = parts.join(" · ");
    h.hidden = parts.length === 0;
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
    countHighlights();
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
    countHighlights();
    const open = state.timelineID && state.cards.get(state.timelineID);
    if (open) updateActions(open);
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
    scheduleQueues(); // changes missed while the stream was away
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
    if (m.type === QUEUE_EVENT) {
      scheduleQueues(); // the task itself did not change
    } else {
      state.pending.add(id);
      scheduleFlush(0);
    }
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
    resetActions();
    if (card) updateActions(card);
    $("timeline").hidden = false;
    $("timeline-close").focus();
    queueTimeline();
  }

  function closeTimeline() {
    const id = state.timelineID;
    state.timelineID = null;
    $("timeline").hidden = true;
    $("timeline-body").replaceChildren();
    resetActions();
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
      ["Depends on", Array.isArray(task.dependsOn) && task.dependsOn.length ? taskLinks(task.dependsOn) : null],
    ]);
    body.push(summary);
    updateActions(card, t.shipOperations);
    const stalled = stalledOf(task);
    if (stalled) {
      body.push(el("div", { class: "stalled-box" },
        el("h3", {}, "Stalled"),
        el("p", {}, "No progress since ", timeEl(stalled.since),
          stalled.lastActivityAt ? el("span", {}, "; last activity ", timeEl(stalled.lastActivityAt)) : null, ".")));
    }
    const waiting = waitingOf(task);
    if (waiting.length) {
      body.push(el("div", { class: "waiting-box" },
        el("h3", {}, `Waiting on ${waiting.length} task${waiting.length === 1 ? "" : "s"}`),
        el("p", {}, taskLinks(waiting), " ", el("span", { class: "muted" }, "must be done first."))));
    }
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
    if (d.change && d.queue) {
      const q = d.queue;
      meta.push(`merge queue of ${q.repository} into ${q.base}: ${words(d.change)}` +
        (q.position ? `, position ${q.position} of ${q.entries}` : "") + (q.paused ? " (paused)" : "") +
        (q.landedSha ? `, landed in ${shortSHA(q.landedSha)}` : ""));
    }
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

  // ---- Actions on a task ----

  // hasScope reports whether the session's key has scope s.
  const hasScope = (s) => !!(state.session && Array.isArray(state.session.scopes) && state.session.scopes.includes(s));
  const canShip = () => hasScope("ship:write");

  // The parts of the actions panel of the open task, built once.
  const acts = {};

  function buildActions() {
    const a = acts;
    a.node = $("timeline-actions");
    a.start = el("button", { type: "button", class: "act-start" }, "Start rework");
    a.start.addEventListener("click", () => act("start"));
    a.retry = el("button", { type: "button", class: "act-retry-ship" }, "Retry ship");
    a.retry.addEventListener("click", () => act("ship"));
    a.resolution = el("input", { id: "resolution", type: "text", class: "why-input", maxlength: String(MAX_REASON), autocomplete: "off", placeholder: "optional" });
    a.resolve = el("button", { type: "button", class: "act-resolve" }, "Resolve blocker");
    a.resolve.addEventListener("click", () => act("resolve"));
    a.resolveControls = el("span", { class: "controls" }, el("label", { for: "resolution" }, "Resolution"), a.resolution, a.resolve);
    a.cancel = el("button", { type: "button", class: "act-cancel danger" }, "Cancel task…");
    a.cancel.addEventListener("click", () => {
      a.question.textContent = `Cancel ${state.actCard ? state.actCard.identifier : "this task"}? Its work stops, and a cancelled task cannot be started again.`;
      a.confirmBox.hidden = false;
      a.reason.focus();
    });
    a.question = el("p", { class: "confirm-question" });
    a.reason = el("input", { id: "cancel-reason", type: "text", class: "why-input", maxlength: String(MAX_REASON), autocomplete: "off", placeholder: "optional" });
    a.confirm = el("button", { type: "button", class: "act-confirm-cancel danger" }, "Cancel the task");
    a.confirm.addEventListener("click", () => act("cancel"));
    a.keep = el("button", { type: "button", class: "act-keep" }, "Keep it");
    a.keep.addEventListener("click", () => {
      a.confirmBox.hidden = true;
      a.cancel.focus();
    });
    a.confirmBox = el("div", { class: "confirm", role: "group", "aria-label": "Confirm the cancellation", hidden: true },
      a.question, el("div", { class: "controls" }, el("label", { for: "cancel-reason" }, "Reason"), a.reason, a.confirm, a.keep));
    a.result = el("p", { class: "result", role: "status" });
    a.buttons = [a.start, a.retry, a.resolve, a.cancel, a.confirm];
    a.node.append(el("h3", {}, "Actions"), el("div", { class: "controls" }, a.start, a.retry, a.resolveControls, a.cancel), a.confirmBox, a.result);
  }

  // resetActions empties the panel, for another task (or none).
  function resetActions() {
    state.actCard = null;
    state.actLastOp = undefined;
    acts.resolution.value = "";
    acts.reason.value = "";
    acts.confirmBox.hidden = true;
    acts.result.textContent = "";
    delete acts.result.dataset.kind;
    acts.node.hidden = true;
  }

  // updateActions shows the actions the open task offers to this
  // session: those its availableActions list (cancel: any task not done,
  // cancelled or being shipped) and the session's scopes allow. ops, when
  // given, are the task's ship operations, oldest first.
  function updateActions(card, ops) {
    if (!card || card.id !== state.timelineID) return;
    if (state.actCard && state.actCard.id === card.id && state.actCard.version > card.version) return;
    state.actCard = card;
    if (ops !== undefined) state.actLastOp = ops.length ? ops[ops.length - 1] : null;
    const a = acts;
    const offered = new Set(card.availableActions || []);
    const op = state.actLastOp;
    const start = hasScope("tasks:write") && offered.has("start") && card.status === "in_review";
    const resolve = hasScope("tasks:write") && offered.has("resolve_blocker");
    const retry = hasScope("ship:write") && offered.has("ship") && !!op && op.status === "failed" && !!card.headSha;
    const cancel = hasScope("tasks:admin") && card.status !== "done" && card.status !== "cancelled" && !card.shipping;
    a.start.hidden = !start;
    a.resolveControls.hidden = !resolve;
    a.retry.hidden = !retry;
    if (retry) {
      a.retry.textContent = `Retry ship (${words(op.mode)} to ${op.targetEnvironment})`;
      a.retry.title = `Ship ${shortSHA(card.headSha)} again; operation ${op.operationId} failed: ${op.error ? op.error.code : "failed"}`;
    }
    a.cancel.hidden = !cancel;
    if (!cancel) a.confirmBox.hidden = true;
    for (const b of a.buttons) b.disabled = state.actBusy;
    a.node.hidden = !(start || resolve || retry || cancel) && a.result.textContent === "";
  }

  function showActResult(text, ok) {
    acts.result.textContent = text;
    acts.result.dataset.kind = ok ? "ok" : "error";
    acts.node.hidden = false;
  }

  // act asks the API, as the session, for one action on the open task:
  // with the session's CSRF token (api adds it) and a new Idempotency-Key
  // for each click. The card moves when the task's event arrives.
  async function act(kind) {
    const card = state.actCard;
    if (!card || state.actBusy) return;
    const a = acts;
    const op = state.actLastOp;
    let path;
    let body;
    switch (kind) {
      case "start":
        path = "start";
        break;
      case "resolve": {
        path = "resolve-blocker";
        const resolution = a.resolution.value.trim();
        if (resolution) body = { resolution };
        break;
      }
      case "cancel": {
        path = "cancel";
        const reason = a.reason.value.trim();
        if (reason) body = { reason };
        break;
      }
      case "ship":
        if (!op) return;
        path = "ship";
        body = { mode: op.mode, targetEnvironment: op.targetEnvironment, expectedHeadSha: card.headSha };
        break;
      default:
        return;
    }
    const gen = state.generation;
    const id = card.id;
    state.actBusy = true;
    for (const b of a.buttons) b.disabled = true;
    try {
      const res = await api("POST", `api/tasks/${encodeURIComponent(id)}/${path}`, { body, headers: { "Idempotency-Key": idempotencyKey() } });
      if (gen !== state.generation || state.timelineID !== id) return;
      const d = res.data || {};
      switch (kind) {
        case "start":
          showActResult(`Started: ${card.identifier} is ${statusLabel(d.status).toLowerCase()} again, for rework.`, true);
          break;
        case "resolve":
          a.resolution.value = "";
          showActResult(`Resolved: ${card.identifier} is ${statusLabel(d.status).toLowerCase()} again.`, true);
          break;
        case "cancel":
          a.reason.value = "";
          a.confirmBox.hidden = true;
          showActResult(`Cancelled: ${card.identifier}.`, true);
          break;
        case "ship":
          showActResult(`Ship accepted: operation ${d.operationId} is ${d.status}.`, true);
          break;
      }
    } catch (e) {
      if (gen !== state.generation || state.timelineID !== id || e.status === 401) return;
      showActResult(errorText(e), false);
    } finally {
      if (gen === state.generation) {
        state.actBusy = false;
        if (state.actCard) updateActions(state.actCard);
      }
    }
  }

  // ---- Merge queues ----

  // scheduleQueues reads the merge queues again soon: at most once every
  // QUEUES_EVERY_MS, however many task.merge_queue events arrive, and
  // once more after a read that changes arrived during.
  function scheduleQueues() {
    if (!state.session) return;
    if (state.queuesLoading) {
      state.queuesDirty = true;
      return;
    }
    if (state.queuesTimer) return;
    const wait = Math.max(0, state.queuesReadAt + QUEUES_EVERY_MS - performance.now());
    state.queuesTimer = setTimeout(loadQueues, wait);
  }

  async function loadQueues() {
    clearTimeout(state.queuesTimer);
    state.queuesTimer = 0;
    if (!state.session) return;
    if (state.queuesLoading) {
      state.queuesDirty = true;
      return;
    }
    const gen = state.generation;
    state.queuesLoading = true;
    state.queuesDirty = false;
    state.queuesReadAt = performance.now();
    const status = $("queues-status");
    try {
      const res = await api("GET", "queues");
      if (gen !== state.generation) return;
      renderQueues(res.data);
      markQueued(res.data);
      status.textContent = `${res.data.length} queue${res.data.length === 1 ? "" : "s"}, read ${timeFormat.format(new Date())}`;
    } catch (e) {
      if (gen !== state.generation) return;
      if (e.status !== 401) status.textContent = `The merge queues could not be read: ${e.message}`;
    } finally {
      if (gen === state.generation) state.queuesLoading = false;
    }
    if (gen === state.generation && state.queuesDirty) scheduleQueues();
  }

  function renderQueues(list) {
    const seen = new Set();
    const nodes = [];
    for (const q of list) {
      seen.add(q.id);
      let parts = state.queues.get(q.id);
      if (!parts) {
        parts = buildQueue(q.id);
        state.queues.set(q.id, parts);
      }
      updateQueue(parts, q);
      nodes.push(parts.node);
    }
    for (const id of state.queues.keys()) if (!seen.has(id)) state.queues.delete(id);
    if (list.length === 0) {
      nodes.push(el("p", { class: "muted" }, "No merge queues. A queue appears when a change is shipped through the lifecycle's merge queue (Config.MergeQueue)."));
    }
    reconcile($("queues"), nodes);
  }

  // buildQueue builds the parts of a queue that stay while it is
  // refreshed (so a reason being typed is not lost).
  function buildQueue(id) {
    const p = { id };
    p.title = el("h3", { class: "queue-title" });
    p.status = el("span", { class: "queue-status" });
    p.reason = el("p", { class: "pause-reason" });
    p.result = el("p", { class: "result", role: "status" });
    const inputID = `pause-reason-${id}`;
    p.why = el("input", { id: inputID, type: "text", class: "why-input", maxlength: "1000", autocomplete: "off", placeholder: "optional" });
    p.pause = el("button", { type: "button", class: "pause" }, "Pause");
    p.pause.addEventListener("click", () => pauseQueue(p));
    p.resume = el("button", { type: "button", class: "resume" }, "Resume");
    p.resume.addEventListener("click", () => resumeQueue(p));
    p.pauseControls = el("span", { class: "controls" }, el("label", { for: inputID }, "Pause reason"), p.why, p.pause);
    p.controls = el("div", { class: "controls" }, p.pauseControls, p.resume);
    p.stats = el("dl", { class: "stats" });
    p.entries = el("div", { class: "entries" });
    p.candidates = el("div", { class: "candidates" });
    p.node = el("article", { class: "queue", "data-queue-id": id },
      el("header", { class: "queue-head" }, p.title, p.status), p.reason, p.controls, p.result, p.stats, p.entries, p.candidates);
    return p;
  }

  // taskLink is a button that opens a task's timeline.
  function taskLink(taskID, identifier) {
    const card = state.cards.get(taskID);
    return el("button", { type: "button", class: "task-link", "data-task-id": taskID, title: card ? card.title : "Open the timeline" },
      identifier || (card && card.identifier) || taskID);
  }

  // taskLinks is taskLink of each of ids, separated by commas.
  function taskLinks(ids) {
    const span = el("span", { class: "task-links" });
    ids.forEach((id, i) => {
      if (i) span.append(", ");
      span.append(taskLink(id));
    });
    return span;
  }

  function updateQueue(p, q) {
    p.node.dataset.paused = String(!!q.paused);
    p.title.textContent = `${q.repository} into ${q.base}`;
    p.status.replaceChildren(q.paused ? badge("queue", "paused", "paused") : badge("queue", "running", "running"));
    p.reason.textContent = q.paused ? `Paused: ${q.pauseReason || "no reason given"}` : "";
    p.reason.hidden = !q.paused;
    p.controls.hidden = !canShip();
    p.pauseControls.hidden = !!q.paused;
    p.resume.hidden = !q.paused;

    const s = q.stats || {};
    const stats = [
      ["landed", "Landed", s.landed],
      ["ciRuns", "CI runs", s.ciRuns],
      ["batches", "Batches", s.batches],
      ["failedBatches", "Failed batches", s.failedBatches],
      ["bisections", "Bisections", s.bisections],
      ["reworked", "Reworked", s.reworked],
      ["flakyBatches", "Flaky batches", s.flakyBatches],
      ["failRate", "Fail rate", typeof s.failRate === "number" ? `${Math.round(s.failRate * 100)}%` : null],
    ];
    const statNodes = [];
    for (const [key, label, v] of stats) {
      if (v === null || v === undefined) continue;
      statNodes.push(el("div", { class: "stat", "data-stat": key }, el("dt", {}, label), el("dd", {}, String(v))));
    }
    statNodes.push(el("div", { class: "stat" }, el("dt", {}, "Base"), el("dd", {}, q.baseSha ? el("code", { title: q.baseSha }, shortSHA(q.baseSha)) : "—")));
    statNodes.push(el("div", { class: "stat" }, el("dt", {}, "Updated"), el("dd", {}, timeEl(q.updatedAt))));
    p.stats.replaceChildren(...statNodes);

    const idents = new Map();
    for (const e of q.entries) idents.set(e.taskId, e.taskIdentifier);
    if (q.entries.length === 0) {
      p.entries.replaceChildren(el("p", { class: "muted" }, "No changes in the queue."));
    } else {
      const rows = q.entries.map((e) => el("tr", { class: "entry", "data-task-id": e.taskId, "data-state": e.state },
        el("td", { class: "num" }, String(e.position)),
        el("td", {}, taskLink(e.taskId, e.taskIdentifier)),
        el("td", {}, badge("entry", e.state, e.state)),
        el("td", {}, e.priority === "hotfix" ? badge("prio", "hotfix", "hotfix") : el("span", { class: "muted" }, e.priority)),
        el("td", {}, e.pullRequest && e.pullRequest.number ? `${e.pullRequest.owner}/${e.pullRequest.repo}#${e.pullRequest.number}` : "—"),
        el("td", {}, el("code", { title: e.headSha }, shortSHA(e.headSha))),
        el("td", { class: "num" }, e.candidateId ? `#${e.candidateId}` : "—"),
        el("td", {}, timeEl(e.enteredAt))));
      p.entries.replaceChildren(el("table", { class: "table" },
        el("caption", {}, `Entries in landing order (${q.entries.length})`),
        el("thead", {}, el("tr", {}, ...["#", "Task", "State", "Priority", "Pull request", "Head", "Candidate", "Entered"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...rows)));
    }

    if (q.candidates.length === 0) {
      p.candidates.replaceChildren(el("p", { class: "muted" }, "No candidates built or under test."));
      return;
    }
    const rows = q.candidates.map((c) => {
      const checks = el("ul", { class: "checks" });
      for (const ch of c.checks) {
        checks.append(el("li", { "data-check": ch.name }, ch.url ? link(ch.url, ch.name) : el("span", {}, ch.name), " ", badge("check", ch.status, ch.status)));
      }
      if (c.checks.length === 0) checks.append(el("li", { class: "muted" }, "no checks yet"));
      const tasks = el("span", { class: "candidate-tasks" });
      c.taskIds.forEach((id, i) => {
        if (i) tasks.append(", ");
        tasks.append(taskLink(id, idents.get(id)));
      });
      return el("tr", { class: "candidate", "data-candidate-id": String(c.id), "data-state": c.state, "data-kind": c.kind },
        el("td", { class: "num" }, `#${c.id}`),
        el("td", {}, badge("kind", c.kind, c.kind)),
        el("td", {}, badge("candidate", c.state, words(c.state))),
        el("td", {}, tasks),
        el("td", {}, el("code", { title: c.branch }, c.branch), " ", c.sha ? el("code", { title: c.sha }, shortSHA(c.sha)) : null),
        el("td", {}, checks,
          c.failedChecks.length ? el("p", { class: "error" }, `failed: ${c.failedChecks.join(", ")}`) : null));
    });
    p.candidates.replaceChildren(el("table", { class: "table" },
      el("caption", {}, `Candidates (${q.candidates.length})`),
      el("thead", {}, el("tr", {}, ...["", "Kind", "State", "Changes", "Branch", "Checks"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows)));
  }

  // markQueued records which tasks wait in which queue, and redraws the
  // cards whose place changed.
  function markQueued(list) {
    const next = new Map();
    for (const q of list) {
      for (const e of q.entries) {
        const label = `queue #${e.position}${q.paused ? " (paused)" : ""} · ${e.state}`;
        next.set(e.taskId, { queueId: q.id, state: e.state, label, key: `${q.id}|${label}`,
          title: `Position ${e.position} of ${q.entries.length} in the merge queue of ${q.repository} into ${q.base}` });
      }
    }
    const changed = new Set();
    for (const [id, v] of next) {
      const old = state.queued.get(id);
      if (!old || old.key !== v.key || old.title !== v.title) changed.add(id);
    }
    for (const id of state.queued.keys()) if (!next.has(id)) changed.add(id);
    state.queued = next;
    const dirty = new Set();
    for (const id of changed) {
      state.nodes.delete(id);
      const card = state.cards.get(id);
      if (card) dirty.add(card.status);
    }
    for (const status of dirty) if (columnEls.has(status)) renderColumn(status);
  }

  async function pauseQueue(p) {
    p.pause.disabled = true;
    try {
      const reason = p.why.value.trim();
      const res = await api("POST", `queues/${encodeURIComponent(p.id)}/pause`, { body: reason ? { reason } : {} });
      p.why.value = "";
      updateQueue(p, res.data);
      showResult(p, `Paused: ${res.data.pauseReason || "no reason given"}. Nothing is built or landed until it is resumed; candidates under test go on.`, true);
      scheduleQueues();
    } catch (e) {
      showResult(p, errorText(e), false);
    } finally {
      p.pause.disabled = false;
    }
  }

  async function resumeQueue(p) {
    p.resume.disabled = true;
    try {
      const res = await api("POST", `queues/${encodeURIComponent(p.id)}/resume`);
      updateQueue(p, res.data);
      showResult(p, "Resumed: the queue builds and lands again.", true);
      scheduleQueues();
    } catch (e) {
      showResult(p, errorText(e), false);
    } finally {
      p.resume.disabled = false;
    }
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
      showResult(p, errorText(e), false);
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
      showResult(p, errorText(e), false);
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
      showResult(p, errorText(e), false);
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
    $("queues-refresh").addEventListener("click", loadQueues);
    $("queues").addEventListener("click", (ev) => {
      const a = ev.target.closest(".task-link");
      if (a) openTimeline(a.dataset.taskId);
    });
    $("timeline-body").addEventListener("click", (ev) => {
      const a = ev.target.closest(".task-link");
      if (a) openTimeline(a.dataset.taskId);
    });
    buildActions();
    window.addEventListener("hashchange", route);
    document.addEventListener("keydown", (ev) => {
      if (ev.key !== "Escape" || !state.timelineID) return;
      if (!acts.confirmBox.hidden) { // Escape answers the question first: keep the task
        acts.confirmBox.hidden = true;
        acts.cancel.focus();
        return;
      }
      closeTimeline();
    });
    $("board").addEventListener("click", (ev) => {
      const linked = ev.target.closest(".task-link");
      if (linked) {
        openTimeline(linked.dataset.taskId);
        return;
      }
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
