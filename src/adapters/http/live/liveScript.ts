/**
 * The landing page's script (served as `/assets/live.js`): it follows
 * `/live/events` and keeps the figures, the charts of the last 15 minutes,
 * the threads and the instances up to date. Every value goes into the page
 * as text, never as HTML.
 *
 * @since 0.1.0
 */

/**
 * The script's source.
 *
 * @category rendering
 * @since 0.1.0
 */
export const liveScript = `"use strict";
(() => {
  const windowMillis = 15 * 60 * 1000;
  const byId = (id) => document.getElementById(id);
  const number = (value) =>
    value === undefined || value === null ? "–" : value.toLocaleString("en-US", { maximumFractionDigits: 1 });
  const bytes = (value) => {
    if (value === undefined || value === null) return "–";
    if (value < 1024) return value + " B";
    if (value < 1048576) return (value / 1024).toFixed(1) + " KiB";
    return (value / 1048576).toFixed(1) + " MiB";
  };
  const duration = (millis) => {
    const s = Math.max(0, Math.floor(millis / 1000));
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    return d > 0 ? d + "d " + h + "h" : h > 0 ? h + "h " + m + "m" : m > 0 ? m + "m " + (s % 60) + "s" : (s % 60) + "s";
  };
  const setText = (id, text) => {
    const element = byId(id);
    if (element !== null && element.textContent !== text) element.textContent = text;
  };
  const row = (cells, className) => {
    const tr = document.createElement("tr");
    if (className) tr.className = className;
    for (const [text, name] of cells) {
      const td = document.createElement("td");
      td.textContent = text;
      if (name) td.className = name;
      tr.append(td);
    }
    return tr;
  };
  const samples = [];
  const charts = [
    { id: "chart-rates", series: [["updates/s", "#2a6fdb", (s) => s.updatesPerSecond], ["deliveries/s", "#2f9e44", (s) => s.deliveriesPerSecond]] },
    { id: "chart-members", series: [["affiliates", "#7048e8", (s) => s.affiliates], ["open watches", "#e8590c", (s) => s.watches]] },
    { id: "chart-pressure", series: [["request memory (KiB)", "#c2255c", (s) => (s.requestBytes === undefined ? null : s.requestBytes / 1024)], ["watchers cut off/s", "#a1131f", (s) => s.cutOffPerSecond]] }
  ];
  const dataOf = (chart) => [samples.map((s) => s.at / 1000), ...chart.series.map(([, , value]) => samples.map(value))];
  const drawCharts = () => {
    if (typeof uPlot !== "function") return;
    for (const chart of charts) {
      const element = byId(chart.id);
      if (element === null) continue;
      if (chart.plot === undefined) {
        chart.plot = new uPlot({
          width: Math.max(300, element.clientWidth || 600),
          height: 170,
          series: [{}, ...chart.series.map(([label, stroke]) => ({ label, stroke, width: 1.5, points: { show: false } }))],
          axes: [{}, { size: 64 }],
          scales: { x: { time: true, range: (plot, min, max) => {
            const end = max === null || max === undefined ? Date.now() / 1000 : max;
            return [end - windowMillis / 1000, end];
          } } },
          legend: { live: false }
        }, dataOf(chart), element);
      } else chart.plot.setData(dataOf(chart));
    }
  };
  const showThreads = (threads) => {
    const body = byId("threads");
    if (body === null) return;
    body.replaceChildren(...threads.map((t) => row([
      [t.index === 0 ? "main" : String(t.index), "thread"],
      [t.connections === undefined ? "–" : number(t.connections)],
      [number(t.watches)],
      [bytes(t.requestBytes)],
      [bytes(t.unreadBytes)]
    ], "thread-row")));
  };
  const showInstances = (frame) => {
    const section = byId("instances-section");
    if (section === null) return;
    section.hidden = frame.instances === undefined;
    if (frame.instances === undefined) return;
    setText("instances-error", frame.instancesError ? "Could not list the instances: " + frame.instancesError : "");
    const now = Date.now();
    byId("instances").replaceChildren(...frame.instances.map((i) => row([
      [i.name, "instance-name"],
      [i.address, "instance-address"],
      [i.version],
      [duration(now - i.startedAt)],
      [number(i.threads)],
      [number(i.watches)],
      [number(i.updatesPerSecond)],
      [number(i.deliveriesPerSecond)],
      [duration(now - i.announcedAt) + " ago"]
    ], i.name === frame.self.name ? "instance-row self" : "instance-row")));
  };
  const show = (frame) => {
    const last = samples.length === 0 ? 0 : samples[samples.length - 1].at;
    for (const sample of frame.samples) if (sample.at > last) samples.push(sample);
    const latest = samples[samples.length - 1];
    if (latest !== undefined) {
      while (samples.length > 0 && samples[0].at < latest.at - windowMillis) samples.shift();
      setText("live-clusters", number(latest.clusters));
      setText("live-affiliates", number(latest.affiliates));
      setText("live-endpoints", number(latest.endpoints));
      setText("live-watches", number(latest.watches));
      setText("live-updates", number(latest.updatesPerSecond));
      setText("live-deliveries", number(latest.deliveriesPerSecond));
      setText("live-cut-off", number(latest.cutOffTotal));
      setText("live-request-memory", latest.requestBytes === undefined ? "–" : bytes(latest.requestBytes) + " of " + bytes(latest.requestBudgetBytes));
      setText("live-backend", latest.backendAvailable ? "available" : "unavailable");
    }
    setText("live-self", frame.self.name + ", version " + frame.self.version + ", state " + frame.self.state + ", up " + duration(Date.now() - frame.self.startedAt));
    showThreads(frame.threads);
    showInstances(frame);
    drawCharts();
  };
  const events = new EventSource("/live/events");
  events.onopen = () => setText("live-status", "live");
  events.onerror = () =>
    setText("live-status", events.readyState === EventSource.CLOSED ? "stopped: reload the page to try again" : "reconnecting…");
  events.onmessage = (message) => {
    try {
      show(JSON.parse(message.data));
    } catch (error) {
      setText("live-status", "error: " + error);
    }
  };
})();
`
