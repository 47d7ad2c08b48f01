// The isx dashboard page: renders the view documents the proxy streams
// (/dashboard/events, proxy/dashboard/server.ts). Plain DOM, text only (no innerHTML of
// anything the proxy sends), uPlot (embedded) for the token charts.
"use strict";

const $ = (id) => document.getElementById(id);
let view = null;
const charts = new Map();

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.append(typeof k === "string" || typeof k === "number" ? String(k) : k);
  }
  return e;
}

function ago(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

function num(n) {
  if (n === null || n === undefined) return "–";
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(1)}k`;
  return String(n);
}

function bytes(n) {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

function replace(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function renderHealth(h) {
  const b = $("health");
  b.textContent = `proxy ${h.state}`;
  b.className = `badge ${h.state === "running" ? "ok" : "warn"}`;
  $("proxy-facts").textContent = `pid ${h.pid} · ${h.version} · up ${
    ago(Date.now() - h.started_at)
  } · CA ${h.ca_fingerprint.slice(0, 16)}…`;
  const p = $("problems");
  p.hidden = h.problems.length === 0;
  p.replaceChildren(...h.problems.map((t) => el("li", {}, t)));
}

function renderInstances(list) {
  $("n-instances").textContent = list.length ? `(${list.length})` : "";
  $("no-instances").hidden = list.length > 0;
  replace(
    $("instances").tBodies[0],
    list.map((i) => {
      const flags = [];
      if (i.type === "build") flags.push(el("span", { class: "chip" }, "build"));
      if (i.pool) {
        flags.push(
          el(
            "span",
            {
              class: "chip pool",
              "data-field": "pool",
              title: "warm pool: nobody's until claimed",
            },
            `pool (${i.pool})`,
          ),
        );
      }
      if (i.standing && i.standing !== "held") {
        flags.push(
          el("span", { class: i.standing === "orphaned" ? "chip warn" : "chip" }, i.standing),
        );
      }
      if (i.ca_outdated) {
        flags.push(
          el("span", { class: "chip bad", title: "isx start repairs it" }, "CA out of date"),
        );
      }
      const holder = i.holder
        ? `${i.holder.client || "?"}${i.holder.pid ? ` (pid ${i.holder.pid})` : ""}`
        : "–";
      return el(
        "tr",
        { "data-instance": i.name },
        el("td", {}, el("code", {}, i.name)),
        el("td", {}, i.template || "–"),
        el("td", { class: `state-${i.status}`, "data-field": "status" }, i.status),
        el("td", { title: i.holder ? `session ${i.holder.session}` : "" }, holder),
        el("td", { class: "wrap" }, i.purpose || "–"),
        el(
          "td",
          { "data-age": Date.parse(i.created_at) },
          ago(Date.now() - Date.parse(i.created_at)),
        ),
        el("td", {}, el("code", {}, i.address || "–")),
        el("td", {}, i.network || "–"),
        el("td", {}, flags),
      );
    }),
  );
}

function seriesData(s) {
  if (!s) return [[], [], [], [], []];
  return [s.t, s.input, s.output, s.cache_read, s.cache_creation];
}

/** A chart of one instance's tokens over the last hour (made once it has a call). */
function newPlot(chart, series) {
  const width = Math.max(200, chart.clientWidth || 300);
  return new uPlot(
    {
      width,
      height: 150,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: {
          time: true,
          // the last hour, whatever the data: one call is a point, not a year-wide axis
          range: () => {
            const now = Date.now() / 1000;
            return [now - 3600, now];
          },
        },
        y: { range: (_u, _min, max) => [0, Math.max(10, max * 1.1)] },
      },
      axes: [
        { stroke: "#888", size: 30 },
        { stroke: "#888", size: 48, values: (_u, ticks) => ticks.map(num) },
      ],
      series: [
        {},
        { label: "in", stroke: "#2f6fdb", width: 1.5, points: { show: true, size: 4 } },
        { label: "out", stroke: "#d9480f", width: 1.5, points: { show: true, size: 4 } },
        { label: "cache read", stroke: "#2b8a3e", width: 1.5, points: { show: true, size: 4 } },
        {
          label: "cache write",
          stroke: "#ae3ec9",
          width: 1.5,
          points: { show: true, size: 4 },
        },
      ],
    },
    seriesData(series),
    chart,
  );
}

function renderCards(list) {
  const box = $("cards");
  const names = new Set(list.map((i) => i.name));
  for (const [name, c] of charts) {
    if (!names.has(name)) {
      c.plot?.destroy();
      c.card.remove();
      charts.delete(name);
    }
  }
  for (const i of list) {
    const a = i.activity || {};
    let c = charts.get(i.name);
    if (!c) {
      const nums = el("div", { class: "nums" });
      const chart = el("div", { class: "chart" });
      const card = el(
        "div",
        { class: "card", "data-card": i.name },
        el("h3", {}, i.name),
        nums,
        chart,
      );
      box.append(card);
      c = { card, nums, chart, plot: null, last: "" };
      charts.set(i.name, c);
    }
    const key = JSON.stringify(i.series);
    if (key !== c.last) {
      c.last = key;
      if (c.plot) c.plot.setData(seriesData(i.series));
      else if (i.series) {
        c.chart.replaceChildren();
        c.plot = newPlot(c.chart, i.series);
      } else c.chart.replaceChildren(el("p", { class: "muted" }, "no model call in the last hour"));
    }
    const idle = a.in_flight === 0 && a.last_response_at
      ? ago(Date.now() - a.last_response_at)
      : "–";
    const cell = (field, label, value) =>
      el("div", {}, el("b", { "data-field": field }, value), el("span", {}, label));
    c.nums.replaceChildren(
      cell("requests", "model calls", num(a.requests ?? 0)),
      cell("input_tokens", "tokens in", num(a.input_tokens ?? 0)),
      cell("output_tokens", "tokens out", num(a.output_tokens ?? 0)),
      cell("cache_read_input_tokens", "cache read", num(a.cache_read_input_tokens ?? 0)),
      cell("cache_creation_input_tokens", "cache write", num(a.cache_creation_input_tokens ?? 0)),
      cell("in_flight", "in flight", num(a.in_flight ?? 0)),
      cell("idle", "idle", idle),
      cell("traffic_bytes_sent", "traffic up", bytes(a.traffic_bytes_sent ?? 0)),
      cell("traffic_bytes_received", "traffic down", bytes(a.traffic_bytes_received ?? 0)),
      cell("traffic_requests", "requests", num(a.traffic_requests ?? 0)),
      cell("traffic_requests_in_flight", "open now", num(a.traffic_requests_in_flight ?? 0)),
      cell("refused", "refused", num(a.refused ?? 0)),
    );
  }
}

function renderTasks(list) {
  $("n-tasks").textContent = list.length ? `(${list.length})` : "";
  $("no-tasks").hidden = list.length > 0;
  const rows = [...list].reverse().map((t) => {
    const running = t.state === "running" || t.state === "attached";
    const elapsed = ago((running ? Date.now() : t.updated) - t.first_seen);
    return el(
      "tr",
      { "data-task": t.task_id },
      el("td", {}, el("code", {}, t.task_id)),
      el("td", {}, el("code", {}, t.instance)),
      el("td", {}, t.kind),
      el("td", {}, [t.agent, t.model].filter(Boolean).join(" / ") || "–"),
      el("td", {}, t.run),
      el("td", { class: `state-${t.state}`, "data-field": "state" }, t.state),
      el("td", { "data-field": "exit_code" }, t.exit_code === undefined ? "–" : t.exit_code),
      el("td", { "data-since": running ? t.first_seen : null }, elapsed),
      el("td", { class: "wrap" }, t.join ? el("code", {}, t.join) : "–"),
    );
  });
  replace($("tasks").tBodies[0], rows);
}

function renderRefusals(list) {
  $("n-refusals").textContent = list.length ? `(${list.length})` : "";
  $("no-refusals").hidden = list.length > 0;
  $("refusals").replaceChildren(...list.map((r) =>
    el(
      "li",
      { "data-kind": r.kind, "data-target": r.target },
      el("span", { class: "muted" }, new Date(r.at).toLocaleTimeString(), " "),
      el("b", {}, r.kind.replace("_", " ")),
      " ",
      el("code", {}, r.target),
      r.instance ? [" from ", el("code", {}, r.instance)] : " from an unknown address",
      r.count > 1 ? ` ×${r.count}` : "",
      ": ",
      r.reason,
      r.fix ? el("span", { class: "fix" }, r.fix) : null,
    )
  ));
}

function render() {
  if (!view) return;
  renderHealth(view.health);
  renderInstances(view.instances);
  renderCards(view.instances);
  renderTasks(view.tasks);
  renderRefusals(view.refusals);
}

function connect() {
  const live = $("live");
  const es = new EventSource("/dashboard/events");
  es.addEventListener("view", (ev) => {
    view = JSON.parse(ev.data);
    live.textContent = "live";
    live.className = "badge ok";
    render();
  });
  es.onerror = () => {
    live.textContent = "reconnecting";
    live.className = "badge off";
  };
}

// ages and idle times move with the clock, not with the proxy
setInterval(() => {
  for (const td of document.querySelectorAll("[data-age]")) {
    td.textContent = ago(Date.now() - Number(td.dataset.age));
  }
  for (const td of document.querySelectorAll("[data-since]")) {
    td.textContent = ago(Date.now() - Number(td.dataset.since));
  }
}, 1000);

let resizeTimer;
addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    for (const c of charts.values()) {
      c.plot?.setSize({ width: Math.max(200, c.chart.clientWidth), height: 150 });
    }
  }, 150);
});

connect();
