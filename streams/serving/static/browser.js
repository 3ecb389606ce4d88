// The memory browser: reads a scope's entries and one entry's signal history through the /v1 API with
// the tenant key the user pasted, and draws the entry's score over time as an SVG chart. Read-only: it
// only ever sends GET requests. Texts are inserted as text nodes, never as HTML.
"use strict";

const TIERS = ["protected", "promoted", "confirmed", "pending", "archive_candidate"];
const SVG = "http://www.w3.org/2000/svg";
const state = { key: "", tenant: "", user: "", character: "", scopes: [] };

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function say(message, error = false) {
  $("status").textContent = message;
  $("status").className = error ? "error" : "";
}

function scopePath() {
  const part = encodeURIComponent;
  return `/v1/tenants/${part(state.tenant)}/users/${part(state.user)}/characters/${part(state.character)}`;
}

async function api(path) {
  const response = await fetch(path, { headers: { Authorization: `Bearer ${state.key}` } });
  let body = null;
  try { body = await response.json(); } catch (_) { /* not JSON: reported below */ }
  if (!response.ok) {
    const reason = body && (body.error || body.detail || body.reason);
    throw new Error(`${response.status} ${reason || response.statusText}`);
  }
  return body;
}

function formatScore(score) {
  return score === null || score === undefined ? "—" : (score >= 0 ? "+" : "") + score.toFixed(3);
}

function renderScopes() {
  const list = $("scopes");
  list.replaceChildren();
  for (const scope of state.scopes) {
    const item = el("li", { "data-scope": scope.join("/") }, `${scope[1]} · ${scope[2]}`);
    if (scope[0] === state.tenant && scope[1] === state.user && scope[2] === state.character) item.className = "current";
    item.addEventListener("click", () => { [state.tenant, state.user, state.character] = scope; fill(); load(); });
    list.append(item);
  }
}

function renderTiers(entries) {
  const root = $("tiers");
  root.replaceChildren();
  for (const tier of TIERS) {
    const inTier = entries.filter((e) => e.tier === tier);
    const box = el("div", { class: "tier", "data-tier": tier });
    box.append(el("h3", {}, `${tier.replace("_", " ")} (${inTier.length})`));
    const list = el("ul");
    for (const entry of inTier) {
      const item = el("li", { class: "entry", "data-entry-id": entry.id, "data-score": String(entry.score) });
      item.append(el("span", { class: "kind" }, entry.kind), el("span", { class: "text" }, entry.text),
                  el("span", { class: "score" }, formatScore(entry.score)));
      item.addEventListener("click", () => showEntry(entry.id));
      list.append(item);
    }
    box.append(list);
    root.append(box);
  }
}

async function load() {
  say(`Loading ${state.user} · ${state.character} …`);
  $("detail").hidden = true;
  try {
    const body = await api(`${scopePath()}/entries`);
    const scope = [state.tenant, state.user, state.character];
    if (!state.scopes.some((s) => s.join("/") === scope.join("/"))) state.scopes.push(scope);
    renderScopes();
    renderTiers(body.entries);
    say(`${body.entries.length} entries of ${scope.join("/")} at ${body.clock || "no clock yet"}`);
    document.body.dataset.entries = String(body.entries.length);
    return body;
  } catch (error) {
    $("tiers").replaceChildren();
    say(`Could not load the scope: ${error.message}`, true);
    document.body.dataset.error = error.message;
    return null;
  }
}

function chartPoints(detail) {
  const points = detail.history
    .filter((h) => h.at && typeof h.score === "number")
    .map((h) => ({ t: Date.parse(h.at), score: h.score, label: `${h.event || ""} ${h.cause || ""}`.trim() }));
  const now = detail.clock ? Date.parse(detail.clock) : NaN;
  const last = points[points.length - 1];
  if (typeof detail.entry.score === "number" && !Number.isNaN(now) && (!last || now > last.t)) {
    points.push({ t: now, score: detail.entry.score, label: "now (decayed)" });
  }
  return points;
}

function drawChart(points) {
  const width = 600, height = 240, left = 48, right = 12, top = 12, bottom = 28;
  const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "data-points": String(points.length) });
  svg.append(el("svg:title", {}, "evidence score over time"));
  if (!points.length) {
    svg.append(el("svg:text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "no scored signals yet"));
    return svg;
  }
  const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1);
  const scores = points.map((p) => p.score);
  const lo = Math.min(0, ...scores) - 0.25, hi = Math.max(0, ...scores) + 0.25;
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (width - left - right);
  const y = (s) => top + ((hi - s) / (hi - lo)) * (height - top - bottom);
  svg.append(el("svg:line", { x1: left, x2: width - right, y1: y(0), y2: y(0), stroke: "#9aa3b5", "stroke-dasharray": "4 3" }));
  for (const s of [hi - 0.25, lo + 0.25]) {
    svg.append(el("svg:text", { x: left - 6, y: y(s) + 4, "text-anchor": "end", "font-size": 11 }, s.toFixed(2)));
  }
  const day = (t) => new Date(t).toISOString().slice(0, 10);
  svg.append(el("svg:text", { x: left, y: height - 8, "font-size": 11 }, day(t0)));
  svg.append(el("svg:text", { x: width - right, y: height - 8, "text-anchor": "end", "font-size": 11 }, day(t1)));
  const line = points.map((p) => `${x(p.t).toFixed(1)},${y(p.score).toFixed(1)}`).join(" ");
  svg.append(el("svg:polyline", { points: line, fill: "none", stroke: "#3867d6", "stroke-width": 2 }));
  for (const p of points) {
    const dot = el("svg:circle", { cx: x(p.t).toFixed(1), cy: y(p.score).toFixed(1), r: 4, fill: "#3867d6",
                                   class: "point", "data-score": String(p.score), "data-at": new Date(p.t).toISOString() });
    dot.append(el("svg:title", {}, `${p.label}: ${formatScore(p.score)}`));
    svg.append(dot);
  }
  return svg;
}

async function showEntry(id) {
  try {
    const detail = await api(`${scopePath()}/entries/${encodeURIComponent(id)}`);
    const entry = detail.entry;
    $("detail").hidden = false;
    $("detail").dataset.entryId = entry.id;
    $("detail-title").textContent = entry.text;
    $("detail-meta").textContent = `${entry.kind} · ${entry.status} · tier ${entry.tier} · score ${formatScore(entry.score)}`;
    const points = chartPoints(detail);
    $("chart").replaceChildren(entry.protected
      ? el("p", {}, "A character-card entry: protected, outside the evidence (no score).")
      : drawChart(points));
    const rows = detail.history.map((h) => {
      const row = el("tr");
      const at = h.at ? new Date(Date.parse(h.at)).toISOString().slice(0, 16).replace("T", " ") : "";
      for (const cell of [at, h.event, h.cause, formatScore(h.score), h.tier]) row.append(el("td", {}, cell ?? ""));
      return row;
    });
    $("history").tBodies[0].replaceChildren(...rows);
    showVersions(detail.version_history || []);
    document.body.dataset.chart = entry.id;
  } catch (error) {
    say(`Could not load entry ${id}: ${error.message}`, true);
  }
}

function showVersions(versions) {
  // The texts a correction or an edit replaced, oldest first: the entry kept its id and counters.
  const rows = versions.map((v) => {
    const row = el("tr", { class: "version" });
    const at = new Date(Date.parse(v.replaced_at)).toISOString().slice(0, 16).replace("T", " ");
    for (const cell of [at, v.text, v.reason, v.source_fact_id]) row.append(el("td", {}, cell ?? ""));
    return row;
  });
  $("versions").tBodies[0].replaceChildren(...rows);
  $("versions").hidden = $("versions-title").hidden = !versions.length;
  document.body.dataset.versions = String(versions.length);
}

function fill() {
  for (const name of ["key", "tenant", "user", "character"]) $(name).value = state[name];
}

function readForm() {
  for (const name of ["key", "tenant", "user", "character"]) state[name] = $(name).value.trim();
}

async function start() {
  // Scripted use (and the browser test): #tenant=…&user=…&character=…&key=…&entry=… fills the form and
  // loads. The fragment never leaves the browser, so a key given this way is not sent to any server log.
  const params = new URLSearchParams(location.hash.slice(1));
  for (const name of ["key", "tenant", "user", "character"]) state[name] = params.get(name) || "";
  fill();
  $("scope-form").addEventListener("submit", (event) => { event.preventDefault(); readForm(); load(); });
  if (state.key && state.tenant && state.user && state.character) {
    history.replaceState(null, "", location.pathname);  // drop the key from the address bar
    const body = await load();
    const entry = params.get("entry");
    if (body && entry) await showEntry(entry);
  }
  document.body.dataset.ready = "true";
}

start();
