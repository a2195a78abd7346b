// dsh-recall dashboard. Plain DOM: every value from the server is set with textContent,
// never parsed as HTML (excerpts come from repositories, transcripts and tool output).
"use strict";

const SOURCES = ["code", "history", "notes", "objects", "all"];
const COLORS = { code: "#3b6fd4", history: "#c8742c", notes: "#3e9a5b", objects: "#8a4fc2", all: "#6b7683" };
const SVG = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);
const fmt = (n) => (n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"));
const bytes = (n) => {
  if (n === null || n === undefined) return "-";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0, v = n;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : String(v)) + " " + u[i];
};
const when = (t) => (t ? new Date(t * 1000).toLocaleString() : "never");

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(el("td", c));
  return tr;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

function drawDays(days) {
  const box = $("days-chart");
  const W = 1000, H = 180, pad = 24;
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  let hi = 1, lo = 0;
  for (const d of days) {
    let up = 0, down = 0;
    for (const src of Object.values(d.sources)) {
      if (src.kept_out_tokens >= 0) up += src.kept_out_tokens; else down += src.kept_out_tokens;
    }
    hi = Math.max(hi, up); lo = Math.min(lo, down);
  }
  const scale = (H - 2 * pad) / (hi - lo);
  const zero = pad + hi * scale;
  const bw = days.length ? Math.min(60, (W - 2 * pad) / days.length) : 0;
  s.appendChild(svg("line", { x1: pad, x2: W - pad, y1: zero, y2: zero, stroke: "#d9dee3" }));
  days.forEach((d, i) => {
    const x = pad + i * bw + 2;
    let up = zero, down = zero;
    for (const name of SOURCES) {
      const src = d.sources[name];
      if (!src || !src.kept_out_tokens) continue;
      const h = Math.abs(src.kept_out_tokens) * scale;
      const y = src.kept_out_tokens >= 0 ? (up -= h) : down;
      if (src.kept_out_tokens < 0) down += h;
      const r = svg("rect", { x, y, width: Math.max(1, bw - 4), height: Math.max(1, h), fill: COLORS[name] });
      const tip = svg("title", {});
      tip.textContent = `${d.day} ${name}: ${fmt(src.kept_out_tokens)} tokens`;
      r.appendChild(tip);
      s.appendChild(r);
    }
    if (days.length <= 31) {
      const t = svg("text", { x: x + bw / 2 - 2, y: H - 6, "font-size": 10, "text-anchor": "middle", fill: "#65707c" });
      t.textContent = d.day.slice(5);
      s.appendChild(t);
    }
  });
  box.replaceChildren(s);
  $("legend").replaceChildren(...SOURCES.map((n) => {
    const sp = el("span", n);
    const i = el("i");
    i.style.background = COLORS[n];
    sp.prepend(i);
    return sp;
  }));
}

function drawFootprint(fp) {
  const max = Math.max(1, ...Object.values(fp.parts));
  $("footprint").replaceChildren(...Object.entries(fp.parts).filter(([, v]) => v > 0).map(([k, v]) => {
    const b = el("div", null, "bar");
    const f = el("div", null, "fill");
    f.style.width = `${(100 * v) / max}%`;
    const track = el("div");
    track.appendChild(f);
    b.append(el("span", k), track, el("span", bytes(v)));
    return b;
  }));
}

function render(r) {
  const t = r.totals;
  $("home").textContent = r.home;
  $("kept-tokens").textContent = fmt(t.kept_out_tokens);
  $("kept-chars").textContent = fmt(t.kept_out_chars);
  $("token-method").textContent = r.tokens.method;
  $("calls").textContent = fmt(t.calls);
  $("ops").textContent = Object.entries(t.ops).map(([k, v]) => `${fmt(v)} ${k}`).join(" · ") || "no calls yet";
  const o = r.objects;
  $("hit-ratio").textContent = o.recall_hit_ratio === null ? "-" : `${Math.round(o.recall_hit_ratio * 100)}%`;
  $("hit-detail").textContent = `${fmt(o.recalled)} of ${fmt(o.offloaded)} offloaded objects recalled; ${fmt(o.recalls)} recall calls`;
  $("disk").textContent = bytes(r.footprint.total_bytes);
  $("disk-detail").textContent = `${r.indexes.code.length} code indexes, ${r.indexes.notes.length} notes indexes`;

  fill($("sources-table").tBodies[0], Object.entries(r.sources).map(([name, s]) =>
    row([name, fmt(s.calls), fmt(s.returned_chars), fmt(s.replaced_chars), fmt(s.kept_out_chars), fmt(s.kept_out_tokens)])));
  fill($("workspaces-table").tBodies[0], r.workspaces.map((w) => {
    const i = w.index || {};
    return row([w.workspace || "(no workspace: notes, objects, all sessions)", fmt(w.calls), fmt(w.kept_out_tokens),
      fmt(i.files), fmt(i.stale_files), fmt(i.pending_vectors), i.files === undefined ? "-" : when(i.last_indexed),
      i.bytes === undefined ? "-" : bytes(i.bytes)]);
  }));
  fill($("notes-table").tBodies[0], r.indexes.notes.map((n) =>
    row([(n.roots || []).join(", ") || n.database, fmt(n.files), fmt(n.stale_files), fmt(n.pending_vectors), when(n.last_indexed)])));
  const h = r.indexes.history;
  $("history-line").textContent = h && !h.error
    ? `history: ${fmt(h.sessions)} sessions, ${fmt(h.events)} events, ${fmt(h.blocks)} blocks, ${fmt(h.pending_vectors)} pending vectors`
    : "history: nothing imported yet";
  drawDays(r.days);
  drawFootprint(r.footprint);
  $("honesty").replaceChildren(...r.honesty.map((n) => el("li", n)));
  const sel = $("ws-select");
  const current = sel.value;
  const spaces = [r.workspace, ...r.indexes.code.map((c) => c.workspace).filter((w) => w && w !== r.workspace)];
  sel.replaceChildren(...spaces.map((w) => { const op = el("option", w); op.value = w; return op; }));
  if (spaces.includes(current)) sel.value = current;
  $("status").textContent = `${r.period.from || "-"} .. ${r.period.to} · ${fmt(r.log.records)} usage records · built in ${r.elapsed_ms} ms`;
  document.body.dataset.report = "ready";
}

async function getJSON(url) {
  const res = await fetch(url, { headers: { Accept: "application/json" } });
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

async function loadReport() {
  document.body.dataset.report = "loading";
  try {
    render(await getJSON(`/api/report?days=${encodeURIComponent($("days").value)}`));
  } catch (e) {
    $("status").textContent = `could not build the report: ${e.message}`;
    document.body.dataset.report = "error";
  }
}

async function loadBaseline() {
  try {
    const b = await getJSON("/api/baseline");
    if (b.available && b.change !== null) {
      const w = b.with_recall, wo = b.without_recall;
      $("baseline").textContent = `with recall: ${fmt(w.avg_input_tokens)} input tokens per request ` +
        `(${w.sessions} sessions, ${w.requests} requests); without: ${fmt(wo.avg_input_tokens)} ` +
        `(${wo.sessions} sessions, ${wo.requests} requests): ${(b.change * 100).toFixed(1)}%. ${b.note}`;
    } else {
      $("baseline").textContent = b.note;
    }
  } catch (e) {
    $("baseline").textContent = `could not read dsh sessions: ${e.message}`;
  }
}

async function search(ev) {
  ev.preventDefault();
  const q = $("q").value.trim();
  if (!q) return;
  const sources = [...document.querySelectorAll("input[name=src]:checked")].map((c) => c.value);
  const params = new URLSearchParams({ q, sources: sources.join(","), workspace: $("ws-select").value, limit: "12" });
  $("search-status").textContent = "searching…";
  $("search-match").hidden = true;
  $("results").dataset.state = "searching";
  try {
    const d = await getJSON(`/api/search?${params}`);
    // How sure the answer is, above it when it is not strong (the server's sentence).
    $("search-match").textContent = d.match_note || "";
    $("search-match").hidden = !d.match_note;
    $("results").replaceChildren(...d.results.map((r) => {
      const li = el("li");
      li.dataset.source = r.source;
      if (r.match) li.dataset.match = r.match;
      const head = el("div");
      head.append(el("span", r.source, `badge ${r.source}`), el("span", r.title, "title"));
      if (r.match === "weak") head.append(el("span", "weak", "weak small"));
      if (r.folded) head.append(el("span", `  +${r.folded} identical`, "muted small"));
      if (r.stale) head.append(el("span", "  stale", "muted small"));
      li.append(head);
      if (r.excerpt) li.append(el("pre", r.excerpt, "excerpt"));
      return li;
    }));
    const st = Object.entries(d.sources).map(([k, v]) => `${k}: ${v.status} (${v.hits})`).join(" · ");
    $("search-status").textContent = `${d.results.length} hits in ${d.elapsed_ms} ms · ${st}`;
    $("results").dataset.state = "done";
  } catch (e) {
    $("search-status").textContent = `search failed: ${e.message}`;
    $("results").dataset.state = "error";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("days").addEventListener("change", loadReport);
  $("search-form").addEventListener("submit", search);
  loadReport();
  loadBaseline();
});
