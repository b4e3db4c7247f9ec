// actormq inspector page: plain browser JavaScript, no build step, no network beyond this server.

const MAX_ENTRIES = 20000;
const MAX_ROWS = 300;
const STATE_POLL_MS = 1000;
const CLUSTER_POLL_MS = 3000;

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A count or offset as a number (0 for anything else): what goes into markup unescaped. */
const num = (v) => {
  const n = Number(v);
  return Number.isFinite(n) ? n : 0;
};
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
/** The inspection record kinds. */
const KINDS = new Set(["actor", "event", "snapshot", "failure"]);
/** xstate's actor statuses, the only words an actor row's class may take. */
const STATUSES = new Set(["active", "done", "error", "stopped"]);

/** `HH:MM:SS.mmm` of a record's time; "?" for a time Date cannot show (a loaded file may hold any). */
function timeText(time) {
  const d = new Date(Number(time));
  return Number.isFinite(d.getTime()) ? d.toISOString().slice(11, 23) : "?";
}

// xstate names an invoke without an explicit id `<index>.<state id>` (`0.rebalancer.balancing`)
const GENERATED_INVOKE_ID = /^\d+\.(?:.*\.)?([^.]+)$/;

/** An actor name with xstate's generated invoke ids cut to the invoking state's key. */
function actorText(name) {
  return name
    .split("/")
    .map((part) => GENERATED_INVOKE_ID.exec(part)?.[1] ?? part)
    .join("/");
}

/** xstate's internal event types as short words (`xstate.after.interval.m.idle` -> `after interval`); others as they are. */
function eventText(type) {
  let m = /^xstate\.after\.([^.]+)\./.exec(type);
  if (m) return /^\d+$/.test(m[1]) ? `after ${m[1]}ms` : `after ${m[1]}`;
  m = /^xstate\.(done|error)\.actor\.(.+)$/.exec(type);
  if (m) return `${m[1]}: ${actorText(m[2])}`;
  if (type.startsWith("xstate.done.state.")) return "done";
  if (type === "xstate.init") return "init";
  if (type === "xstate.promise.resolve") return "promise resolved";
  if (type === "xstate.promise.reject") return "promise rejected";
  return type;
}

const app = {
  mode: "live", // live | paused | file
  entries: [], // { seq, record, topic?, queue?, after? }
  bySeq: new Map(),
  lastEventBySession: new Map(),
  nodes: [],
  unreachable: [], // collect addresses that never answered: { address, failures }
  refused: [], // collect addresses whose node refused the last probe: { address, nodeId?, status, code, message }
  stats: null,
  selected: null, // actor key `${nodeId}|${actorName}`
  cursor: null, // seq shown while paused / in a file; null = follow
  charts: new Map(), // `${nodeId}|${machineId}` (live) or machineId (file) -> chart | null
  fileCharts: null,
  fileData: null,
  chartKey: null,
  expanded: new Set(),
  stream: null,
  epoch: null, // the server run the shown records come from (its event ids are `<epoch>-<seq>`)
  timers: [],
  renderQueued: false,
};

// ---------------------------------------------------------------- data

function addEntries(list) {
  for (const e of list) {
    if (app.bySeq.has(e.seq)) continue;
    const r = e.record;
    const sk = `${r.nodeId}|${r.sessionId}`;
    if (r.kind === "event") app.lastEventBySession.set(sk, e);
    else if (r.kind === "snapshot") {
      const ev = app.lastEventBySession.get(sk);
      if (ev && !ev.after) ev.after = e;
    }
    app.entries.push(e);
    app.bySeq.set(e.seq, e);
  }
  if (app.entries.length > MAX_ENTRIES) {
    for (const old of app.entries.splice(0, app.entries.length - MAX_ENTRIES)) {
      app.bySeq.delete(old.seq);
      // else every actor session ever seen keeps its last event: short-lived actors would grow the page without bound
      if (old.record.kind !== "event") continue;
      const sk = `${old.record.nodeId}|${old.record.sessionId}`;
      if (app.lastEventBySession.get(sk) === old) app.lastEventBySession.delete(sk);
    }
  }
}

function actorOf(key) {
  for (const n of app.nodes) for (const a of n.actors) if (a.key === key) return { node: n, actor: a };
  return null;
}

/** Dot paths of a snapshot value: "idle" -> ["idle"], {running:"a"} -> ["running","running.a"]. */
function valuePaths(v, prefix = "", out = []) {
  if (typeof v === "string") out.push(prefix ? `${prefix}.${v}` : v);
  else if (v && typeof v === "object") {
    for (const [k, sub] of Object.entries(v)) {
      const p = prefix ? `${prefix}.${k}` : k;
      out.push(p);
      valuePaths(sub, p, out);
    }
  }
  return out;
}

function valueText(v) {
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v;
  const leaves = [];
  const walk = (x, p) => {
    if (typeof x === "string") leaves.push(p ? `${p}.${x}` : x);
    else if (x && typeof x === "object") for (const [k, s] of Object.entries(x)) walk(s, p ? `${p}.${k}` : k);
  };
  walk(v, "");
  return leaves.join(", ");
}

/** The latest two snapshots of an actor with seq <= limit (same session as the latest). */
function snapshotsAt(nodeId, actorName, limit) {
  let last = null;
  for (let i = app.entries.length - 1; i >= 0; i--) {
    const e = app.entries[i];
    if (limit !== null && e.seq > limit) continue;
    const r = e.record;
    if (r.kind !== "snapshot" || r.nodeId !== nodeId || r.actorName !== actorName) continue;
    if (!last) last = e;
    else if (r.sessionId === last.record.sessionId) return { last, prev: e };
  }
  return { last, prev: null };
}

function matches(e, f) {
  const r = e.record;
  if (r.kind !== "event" && r.kind !== "failure" && r.kind !== "actor") return false;
  if (f.selected && `${r.nodeId}|${r.actorName}` !== app.selected) return false;
  if (f.actor && !r.actorName.toLowerCase().includes(f.actor) && !r.nodeId.toLowerCase().includes(f.actor)) return false;
  if (f.type && !(r.kind === "event" ? r.type : r.kind).toLowerCase().includes(f.type)) return false;
  if (f.topic && !(e.topic || "").toLowerCase().includes(f.topic)) return false;
  if (f.queue) {
    const q = (e.queue || "").toLowerCase();
    if (!(q === f.queue || q.endsWith(`@${f.queue}`) || (f.queue.includes("@") && q.includes(f.queue)))) return false;
  }
  return true;
}

function filters() {
  return {
    actor: $("filter-actor").value.trim().toLowerCase(),
    type: $("filter-type").value.trim().toLowerCase(),
    topic: $("filter-topic").value.trim().toLowerCase(),
    queue: $("filter-queue").value.trim().toLowerCase(),
    selected: $("filter-selected").checked,
  };
}

function visibleEntries() {
  const f = filters();
  return app.entries.filter((e) => matches(e, f));
}

// ---------------------------------------------------------------- rendering

function scheduleRender() {
  if (app.renderQueued) return;
  app.renderQueued = true;
  setTimeout(() => {
    app.renderQueued = false;
    render();
  }, 80);
}

function render() {
  renderHeader();
  renderTree();
  renderTimeline();
  void renderChart();
}

function renderHeader() {
  const m = $("mode");
  m.className = `mode ${app.mode}`;
  m.textContent = app.mode === "file" ? `file: ${app.fileName}` : app.mode;
  const s = app.stats;
  $("stats").textContent = s
    ? `records ${s.received} · kept ${s.kept} · dropped malformed ${s.malformedDropped} · oversized ${s.oversizedDropped} · evicted ${s.evicted}` +
      // a client without the collector's key (ACTORMQ_INSPECTOR_KEY), or with one the collector does not expect
      (s.refusedPublishers > 0 ? ` · publishers refused ${s.refusedPublishers}` : "")
    : "";
}

function renderTree() {
  const procs = app.nodes.length;
  let actors = 0;
  const html = [];
  for (const n of app.nodes) {
    actors += n.actors.length;
    const gone = n.status === "gone";
    html.push(
      `<li class="proc ${gone ? "gone" : "alive"}" data-node-id="${esc(n.nodeId)}"><div class="proc-head">${esc(n.role)} ${esc(n.nodeId)}` +
        `<span class="badge status">${gone ? "gone" : "alive"}</span> <span class="badge">${n.actors.length} actors</span> <span class="badge">${num(n.records)} records</span></div><ul>`,
    );
    for (const a of n.actors) {
      const depth = a.actorName.split("/").length - 1;
      const status = STATUSES.has(a.status) ? a.status : "";
      const cls = ["actor", a.key === app.selected ? "selected" : "", status, a.hasChart ? "" : "nochart"].filter(Boolean).join(" ");
      const fail = num(a.failures) ? ` <span class="count">failures ${num(a.failures)}</span>` : "";
      html.push(
        `<li class="${cls}" data-actor-key="${esc(a.key)}" data-actor-name="${esc(a.actorName)}" style="padding-left:${4 + depth * 12}px">` +
          `${esc(actorLabel(a.actorName, depth))}<span class="value">${esc(valueText(a.value))}</span>` +
          `<span class="count">${num(a.events)} ev</span>${fail}</li>`,
      );
    }
    html.push("</ul></li>");
  }
  for (const u of app.unreachable) {
    html.push(
      `<li class="proc unreachable" data-address="${esc(u.address)}"><div class="proc-head">${esc(u.address)}` +
        `<span class="badge status">unreachable</span> <span class="badge">${num(u.failures)} failed probes</span></div></li>`,
    );
  }
  // alive, but publishing nothing here: the node's answer says why
  for (const u of app.refused) {
    const status = u.status === "busy" ? "busy" : "refused";
    html.push(
      `<li class="proc refused" data-address="${esc(u.address)}" data-status="${status}"><div class="proc-head">${esc(u.address)}` +
        `${u.nodeId ? ` ${esc(u.nodeId)}` : ""}<span class="badge status">${status}</span></div>` +
        `<div class="reason">${esc(u.code)}: ${esc(u.message)}</div></li>`,
    );
  }
  $("tree").innerHTML = html.join("");
  $("tree-counts").textContent = `(${procs} processes, ${actors} actors)`;
}

/** A tree row's name: the last part of a child's name, an invoked actor as `<state> (invoked)`. */
function actorLabel(name, depth) {
  const last = depth ? name.slice(name.lastIndexOf("/") + 1) : name;
  const m = GENERATED_INVOKE_ID.exec(last);
  return m ? `${m[1]} (invoked)` : last;
}

function entryLine(e) {
  const r = e.record;
  const t = timeText(r.time);
  const what = r.kind === "event" ? eventText(r.type) : r.kind === "failure" ? `failure (${r.action}): ${r.error}` : "created";
  const raw = r.kind === "event" ? r.type : what;
  const where = e.queue ? ` <span class="where">${esc(e.queue)}</span>` : e.topic ? ` <span class="where">${esc(e.topic)}</span>` : "";
  return `<span class="time">${t}</span> <span class="actor" title="${esc(r.actorName)}">${esc(actorText(r.actorName))}</span> <span class="type" title="${esc(raw)}">${esc(what)}</span>${where}`;
}

function renderTimeline() {
  const vis = visibleEntries();
  const upTo = app.cursor === null ? vis : vis.filter((e) => e.seq <= app.cursor);
  const rows = upTo.slice(-MAX_ROWS).reverse();
  const html = rows.map((e) => {
    const r = e.record;
    const cls = ["entry", esc(r.kind), app.cursor !== null && e.seq === app.cursor ? "cursor" : ""].filter(Boolean).join(" ");
    let detail = "";
    if (app.expanded.has(e.seq)) {
      const payload =
        r.kind === "event" ? r.payload : r.kind === "failure" ? { error: r.error, restarts: r.restarts } : { machineId: r.machineId };
      const after = e.after
        ? { status: e.after.record.status, value: e.after.record.value, context: e.after.record.context }
        : "(no snapshot recorded)";
      detail = `<pre class="payload">payload ${esc(JSON.stringify(payload, null, 1))}</pre><pre class="snapshot">snapshot after ${esc(JSON.stringify(after, null, 1))}</pre>`;
    }
    return `<li class="${cls}" data-seq="${num(e.seq)}" data-type="${esc(r.kind === "event" ? r.type : r.kind)}">${entryLine(e)}${detail}</li>`;
  });
  $("timeline").innerHTML = html.join("");
  $("timeline-counts").textContent = `(${upTo.length} shown of ${app.entries.length} records)`;
}

async function loadChart(nodeId, machineId) {
  const key = app.mode === "file" ? machineId : `${nodeId}|${machineId}`;
  if (app.charts.has(key)) return app.charts.get(key);
  let chart = null;
  if (app.mode === "file") {
    chart = Object.hasOwn(app.fileCharts ?? {}, machineId) ? app.fileCharts[machineId] : null;
    if (!isObject(chart) || typeof chart.svg !== "string" || !Array.isArray(chart.states) || !Array.isArray(chart.transitions))
      chart = null;
  } else {
    const res = await fetch(`/api/chart?node=${encodeURIComponent(nodeId)}&machine=${encodeURIComponent(machineId)}`);
    chart = res.ok ? await res.json() : null;
  }
  if (chart || app.mode === "file") app.charts.set(key, chart);
  return chart;
}

async function renderChart() {
  const sel = app.selected ? actorOf(app.selected) : null;
  const box = $("chart");
  if (!sel) {
    $("chart-title").textContent = "Select an actor";
    box.innerHTML = "";
    app.chartKey = null;
    return;
  }
  const { node, actor } = sel;
  $("chart-title").textContent = `${actor.actorName} on ${node.nodeId}${actor.machineId ? ` (machine ${actor.machineId})` : ""}`;
  const chart = actor.machineId ? await loadChart(node.nodeId, actor.machineId) : null;
  const key = chart ? `${node.nodeId}|${actor.machineId}` : null;
  if (!chart) {
    box.innerHTML = `<p class="nochart">${actor.machineId ? "No machine definition received for this actor yet." : "Not a state machine (promise or callback actor)."}</p>`;
    app.chartKey = null;
  } else if (app.chartKey !== key || !box.querySelector("svg")) {
    const svg = safeSvg(chart.svg);
    if (svg) box.replaceChildren(svg);
    else box.innerHTML = `<p class="nochart">This chart cannot be shown (not a statechart drawing).</p>`;
    app.chartKey = key;
  }
  const limit = app.cursor === null ? null : (app.bySeq.get(app.cursor)?.after?.seq ?? app.cursor);
  const { last, prev } = snapshotsAt(node.nodeId, actor.actorName, limit);
  const value = last ? last.record.value : actor.value;
  const status = last ? last.record.status : actor.status;
  $("chart-state").textContent =
    `state: ${valueText(value) || "?"} · status: ${status}${node.status === "gone" ? " · process gone (last known state)" : ""}${last?.record.eventType ? ` · after ${chart?.transitions.find((t) => t.event === last.record.eventType)?.label ?? eventText(last.record.eventType)}` : ""}`;
  const svg = box.querySelector("svg");
  if (!chart || !svg) return;
  const idByPath = new Map(chart.states.map((s) => [s.path, s.id]));
  const active = new Set(
    valuePaths(value)
      .map((p) => idByPath.get(p))
      .filter(Boolean),
  );
  for (const g of svg.querySelectorAll("[data-state]")) g.classList.toggle("active", active.has(g.getAttribute("data-state")));
  const lastIds = new Set();
  const ev = last?.record.eventType;
  if (ev) {
    const prevActive = new Set(
      prev
        ? valuePaths(prev.record.value)
            .map((p) => idByPath.get(p))
            .filter(Boolean)
        : [],
    );
    let cands = chart.transitions.filter((t) => t.event === ev && prevActive.has(t.source));
    if (cands.length === 0) cands = chart.transitions.filter((t) => t.event === ev && t.targets.some((x) => active.has(x)));
    for (const t of cands) lastIds.add(t.id);
    // eventless (always) transitions have no event of their own: the snapshot names the event of
    // the step they were taken in. Taken: from a state active before or entered in the step (or
    // inside one entered), into a state active only now.
    const parentOf = new Map(chart.states.map((s) => [s.id, s.parent]));
    const entered = new Set(cands.flatMap((t) => t.targets));
    const wasIn = (id) => {
      if (prevActive.has(id)) return true;
      for (let s = id; s; s = parentOf.get(s)) if (entered.has(s)) return true;
      return false;
    };
    for (let grew = true; grew; ) {
      grew = false;
      for (const t of chart.transitions) {
        if (t.event !== "" || lastIds.has(t.id) || !wasIn(t.source)) continue;
        if (!t.targets.some((x) => active.has(x) && !prevActive.has(x))) continue;
        lastIds.add(t.id);
        for (const x of t.targets) entered.add(x);
        grew = true;
      }
    }
  }
  for (const g of svg.querySelectorAll("[data-transition]")) g.classList.toggle("last", lastIds.has(g.getAttribute("data-transition")));
}

const SVG_NS = "http://www.w3.org/2000/svg";
/** The elements a statechart drawing is made of (statechartSvg.ts); anything else is dropped. */
const SVG_TAGS = new Set([
  "svg",
  "g",
  "rect",
  "path",
  "text",
  "tspan",
  "title",
  "defs",
  "marker",
  "style",
  "circle",
  "ellipse",
  "line",
  "polyline",
  "polygon",
]);

/**
 * A chart's SVG as an element, parsed as SVG (never as HTML) with only drawing elements kept and
 * no event handler or link attributes: a loaded timeline file's charts are anyone's markup.
 */
function safeSvg(text) {
  if (typeof text !== "string") return null;
  const root = new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
  if (root.namespaceURI !== SVG_NS || root.localName !== "svg") return null;
  const clean = (el) => {
    for (const a of [...el.attributes]) if (/^on/i.test(a.name) || /href$/i.test(a.name)) el.removeAttribute(a.name);
    for (const c of [...el.children]) {
      if (c.namespaceURI !== SVG_NS || !SVG_TAGS.has(c.localName)) c.remove();
      else clean(c);
    }
  };
  clean(root);
  return document.importNode(root, true);
}

function renderCluster(v) {
  const rows = (cols, items) => items.map((it) => `<tr>${cols.map((c) => `<td>${c(it)}</td>`).join("")}</tr>`).join("");
  const brokers = `<table class="brokers"><tr><th>broker</th><th>id</th><th>address</th><th>cluster</th><th>reachable</th></tr>${rows(
    [(b) => esc(b.brokerName), (b) => esc(b.brokerId), (b) => esc(b.address), (b) => esc(b.cluster), (b) => (b.reachable ? "yes" : "no")],
    v.brokers,
  )}</table>`;
  const qs = [];
  for (const t of v.topics) for (const q of t.queues) qs.push({ topic: t.topic, ...q });
  const topics = `<table class="topics"><tr><th>topic</th><th>broker</th><th>queue</th><th>max offset</th></tr>${rows(
    [(q) => esc(q.topic), (q) => esc(q.brokerName), (q) => esc(q.queueId), (q) => esc(q.maxOffset ?? "?")],
    qs,
  )}</table>`;
  const gq = [];
  for (const g of v.groups) for (const q of g.queues) gq.push({ group: g.group, ...q });
  const groups = `<table class="groups"><tr><th>group</th><th>topic</th><th>broker</th><th>queue</th><th>broker offset</th><th>consumer offset</th><th>lag</th><th>assigned to</th></tr>${rows(
    [
      (q) => esc(q.group),
      (q) => esc(q.topic),
      (q) => esc(q.brokerName),
      (q) => esc(q.queueId),
      (q) => esc(q.brokerOffset),
      (q) => esc(q.consumerOffset),
      (q) => `<span class="lag${num(q.lag) > 0 ? " behind" : ""}">${esc(q.lag)}</span>`,
      (q) => esc(q.assignedTo ?? ""),
    ],
    gq,
  )}</table>`;
  const errors = v.errors.length ? `<div class="errors">${v.errors.slice(0, 10).map(esc).join("<br>")}</div>` : "";
  $("cluster").innerHTML =
    `${brokers}${topics}${groups}${errors}<div class="count">as of ${esc(new Date(v.time).toLocaleTimeString())}</div>`;
}

// ---------------------------------------------------------------- live connection

async function pollState() {
  if (app.mode === "file") return;
  try {
    const res = await fetch("/api/state");
    const s = await res.json();
    // a timeline file loaded meanwhile: its processes stay
    if (app.mode === "file") return;
    app.nodes = s.nodes;
    app.unreachable = Array.isArray(s.unreachable) ? s.unreachable.filter((u) => isObject(u) && typeof u.address === "string") : [];
    app.refused = Array.isArray(s.refused) ? s.refused.filter((u) => isObject(u) && typeof u.address === "string") : [];
    app.stats = s.stats;
    scheduleRender();
  } catch {
    // server gone: keep what is shown
  }
}

async function pollCluster() {
  if (app.mode === "file" || !$("cluster-section").open) return;
  try {
    const v = await (await fetch("/api/cluster")).json();
    if (app.mode !== "file") renderCluster(v);
  } catch {
    // keep the last view
  }
}

/** Forgets every record on the page and the charts drawn from them. */
function clearRecords() {
  app.entries = [];
  app.bySeq.clear();
  app.lastEventBySession.clear();
  app.charts.clear();
  app.chartKey = null;
}

/** Forgets every live record: the server restarted and numbers its records from 1 again. */
function resetLive() {
  clearRecords();
  app.expanded.clear();
  app.cursor = null;
  if (app.mode === "paused") app.mode = "live";
}

function connect() {
  const es = new EventSource("/api/stream?after=0");
  es.addEventListener("epoch", (m) => {
    if (app.mode === "file") return;
    if (app.epoch !== null && m.data !== app.epoch) {
      resetLive();
      scheduleRender();
    }
    app.epoch = m.data;
  });
  es.onmessage = (m) => {
    if (app.mode === "file") return;
    addEntries([JSON.parse(m.data)]);
    scheduleRender();
  };
  app.stream = es;
  app.timers.push(setInterval(pollState, STATE_POLL_MS), setInterval(pollCluster, CLUSTER_POLL_MS));
  void pollState();
}

function disconnect() {
  if (app.stream) app.stream.close();
  app.stream = null;
  for (const t of app.timers) clearInterval(t);
  app.timers = [];
}

// ---------------------------------------------------------------- controls

function stepTargets() {
  return visibleEntries().filter((e) => e.record.kind === "event" || e.record.kind === "failure");
}

function pause() {
  if (app.mode === "live") app.mode = "paused";
  if (app.cursor === null) {
    const steps = stepTargets();
    app.cursor = steps.length ? steps[steps.length - 1].seq : (app.entries.at(-1)?.seq ?? 0);
  }
  render();
}

function step(dir) {
  pause();
  const steps = stepTargets();
  if (steps.length === 0) return;
  // the position shown is the last step at or before the cursor
  let cur = -1;
  for (let k = 0; k < steps.length && steps[k].seq <= app.cursor; k++) cur = k;
  let i = cur + dir;
  i = Math.max(0, Math.min(steps.length - 1, i));
  app.cursor = steps[i].seq;
  const e = steps[i];
  if (!app.selected || $("filter-selected").checked === false) app.selected = `${e.record.nodeId}|${e.record.actorName}`;
  render();
}

function goLive() {
  if (app.mode === "file") {
    app.mode = "live";
    clearRecords();
    app.fileCharts = null;
    app.fileData = null;
    $("export-json").setAttribute("href", "/api/export");
    connect();
  }
  app.mode = "live";
  app.cursor = null;
  render();
}

function download(name, type, text) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  document.body.appendChild(a);
  a.click();
  setTimeout(() => {
    URL.revokeObjectURL(a.href);
    a.remove();
  }, 1000);
}

function exportSvg() {
  const svg = $("chart").querySelector("svg");
  if (!svg) return;
  const name = `${(svg.getAttribute("data-machine") || "statechart").replace(/[^\w.-]/g, "_")}.svg`;
  download(name, "image/svg+xml", `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(svg)}`);
}

/** A file's processes with the fields the tree reads as strings and arrays (anything else dropped). */
function fileNodes(nodes) {
  if (!Array.isArray(nodes)) return [];
  return nodes.filter(isObject).map((n) => ({
    ...n,
    nodeId: String(n.nodeId ?? ""),
    role: String(n.role ?? ""),
    actors: (Array.isArray(n.actors) ? n.actors : [])
      .filter((a) => isObject(a) && typeof a.key === "string" && typeof a.actorName === "string")
      .map((a) => ({ ...a, machineId: typeof a.machineId === "string" ? a.machineId : undefined })),
  }));
}

/** A file's entries with a numeric seq and a record of the shape the timeline reads. */
function fileEntries(entries) {
  const out = [];
  for (const e of entries) {
    if (!isObject(e) || !isObject(e.record)) continue;
    const r = e.record;
    if (typeof r.nodeId !== "string" || typeof r.actorName !== "string" || !KINDS.has(r.kind)) continue;
    if (r.kind === "event" && typeof r.type !== "string") continue;
    const seq = Number(e.seq);
    if (!Number.isFinite(seq)) continue;
    out.push({
      ...e,
      seq,
      topic: typeof e.topic === "string" ? e.topic : undefined,
      queue: typeof e.queue === "string" ? e.queue : undefined,
    });
  }
  return out;
}

function loadTimeline(text, name) {
  const data = JSON.parse(text);
  if (data?.format !== "actormq-timeline" || !Array.isArray(data.entries)) throw new Error("not an actormq timeline export");
  disconnect();
  app.mode = "file";
  app.fileName = name;
  app.fileData = text;
  clearRecords();
  app.fileCharts = isObject(data.charts) ? data.charts : {};
  app.nodes = fileNodes(data.nodes);
  app.unreachable = [];
  app.refused = [];
  app.stats = isObject(data.stats) ? data.stats : null;
  addEntries(fileEntries(data.entries));
  app.cursor = app.entries.length ? app.entries[app.entries.length - 1].seq : 0;
  render();
}

function wire() {
  $("pause").onclick = pause;
  $("step-back").onclick = () => step(-1);
  $("step-forward").onclick = () => step(1);
  $("live").onclick = goLive;
  $("export-svg").onclick = exportSvg;
  $("export-json").onclick = (ev) => {
    if (app.mode === "file") {
      ev.preventDefault();
      download(app.fileName || "timeline.json", "application/json", app.fileData);
    }
  };
  $("load-json").onchange = async (ev) => {
    const f = ev.target.files[0];
    if (!f) return;
    try {
      loadTimeline(await f.text(), f.name);
    } catch (e) {
      alert(`Cannot load ${f.name}: ${e.message}`);
    }
    ev.target.value = "";
  };
  $("tree").onclick = (ev) => {
    const li = ev.target.closest("li.actor");
    if (!li) return;
    app.selected = li.getAttribute("data-actor-key");
    render();
  };
  $("timeline").onclick = (ev) => {
    if (ev.target.closest("pre")) return;
    const li = ev.target.closest("li.entry");
    if (!li) return;
    const seq = Number(li.getAttribute("data-seq"));
    if (app.expanded.has(seq)) app.expanded.delete(seq);
    else app.expanded.add(seq);
    renderTimeline();
  };
  for (const id of ["filter-actor", "filter-type", "filter-topic", "filter-queue", "filter-selected"]) $(id).oninput = () => render();
  $("cluster-section").ontoggle = () => void pollCluster();
}

window.inspectorApp = { app, loadTimeline };
wire();
connect();
