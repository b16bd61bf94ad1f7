/**
 * The `/inspect` page's script (served as `/assets/inspect.js`): it follows
 * `/inspect/events` for the cluster of the page and redraws its affiliates
 * and last changes in place as they change, counting each affiliate's time
 * left on the server's clock. Every value goes into the page as text.
 *
 * @since 0.1.0
 */

/**
 * The script's source.
 *
 * @category rendering
 * @since 0.1.0
 */
export const inspectScript = `"use strict";
(() => {
  const clusterId = new URLSearchParams(location.search).get("clusterID");
  const affiliates = document.getElementById("affiliates");
  const history = document.getElementById("history");
  const status = document.getElementById("live-status");
  if (!clusterId || affiliates === null || history === null) return;
  let offset = 0;
  const element = (tag, className, text) => {
    const made = document.createElement(tag);
    if (className) made.className = className;
    if (text !== undefined) made.textContent = text;
    return made;
  };
  const plural = (count, word) => count + " " + word + (count === 1 ? "" : "s");
  const timeLeft = (expiresAt) => {
    const left = Math.round((expiresAt - (Date.now() + offset)) / 1000);
    return left > 0 ? "expires in " + left + " s" : "expired " + -left + " s ago";
  };
  const tick = () => {
    for (const span of document.querySelectorAll(".time-left[data-expires-at]")) {
      const text = timeLeft(Number(span.dataset.expiresAt));
      if (span.textContent !== text) span.textContent = text;
    }
  };
  const affiliateSection = (affiliate) => {
    const section = element("section", "affiliate");
    section.dataset.affiliateId = affiliate.id;
    const heading = element("h3", "", "Affiliate ");
    heading.append(element("code", "affiliate-id", affiliate.id));
    const list = element("dl");
    const data = element("dd", "hex data", affiliate.dataBytes === 0 ? undefined : affiliate.data);
    if (affiliate.dataBytes === 0) data.append(element("span", "note", "empty"));
    const endpoints = element("dd");
    if (affiliate.endpoints.length === 0) endpoints.append(element("p", "note", "No endpoints."));
    else {
      const items = element("ul", "endpoints");
      for (const endpoint of affiliate.endpoints) items.append(element("li", "hex endpoint", endpoint));
      endpoints.append(items);
    }
    const known = element("dd", "known", plural(affiliate.dataBytes, "byte") + " of data, " + plural(affiliate.endpoints.length, "endpoint"));
    if (affiliate.revision !== undefined && affiliate.revision !== null) known.append(", revision " + affiliate.revision);
    if (affiliate.expiresAt !== undefined && affiliate.expiresAt !== null) {
      known.append(", ");
      const left = element("span", "time-left", timeLeft(affiliate.expiresAt));
      left.dataset.expiresAt = String(affiliate.expiresAt);
      known.append(left);
    }
    list.append(element("dt", "", "Data"), data, element("dt", "", "Endpoints"), endpoints, element("dt", "", "Known"), known);
    section.append(heading, list);
    return section;
  };
  const showAffiliates = (frame) => {
    const parts = [];
    if (frame.affiliates.length === 0) parts.push(element("p", "note no-affiliates", "No affiliate data for this cluster."));
    else {
      const count = plural(frame.affiliates.length, "affiliate");
      parts.push(element("p", "affiliate-count", frame.revision === undefined || frame.revision === null ? count + "." : count + ", revision " + frame.revision + "."));
      for (const affiliate of frame.affiliates) parts.push(affiliateSection(affiliate));
    }
    affiliates.replaceChildren(...parts);
  };
  const showHistory = (frame) => {
    const parts = [element("h2", "", "Last changes")];
    if (frame.history === undefined || frame.history === null) parts.push(element("p", "note history-unavailable", "The changes could not be read."));
    else if (frame.history.length === 0) parts.push(element("p", "note no-history", "No changes held. In memory they are kept while the cluster is watched; on a shared state, since its last restart or failover."));
    else {
      const table = element("table", "history");
      const head = element("tr");
      for (const title of ["Revision", "When", "Affiliate", "Cause", "Facts"]) head.append(element("th", "", title));
      table.append(element("thead"), element("tbody"));
      table.tHead.append(head);
      for (const change of frame.history) {
        const tr = element("tr", "change");
        const id = element("td");
        id.append(element("code", "affiliate-id", change.affiliateId));
        tr.append(
          element("td", "revision", change.revision === undefined || change.revision === null ? "" : String(change.revision)),
          element("td", "at", new Date(change.at).toISOString()),
          id,
          element("td", "cause", change.cause),
          element("td", "facts", change.facts)
        );
        table.tBodies[0].append(tr);
      }
      parts.push(table);
    }
    history.replaceChildren(...parts);
  };
  const events = new EventSource("/inspect/events?clusterID=" + encodeURIComponent(clusterId));
  events.onopen = () => { if (status !== null) status.textContent = "Live: changes show here as they happen."; };
  events.onerror = () => {
    if (status !== null) status.textContent = events.readyState === EventSource.CLOSED ? "Live updates stopped: reload the page to try again." : "Reconnecting…";
  };
  events.onmessage = (message) => {
    const frame = JSON.parse(message.data);
    offset = frame.now - Date.now();
    showAffiliates(frame);
    showHistory(frame);
  };
  events.addEventListener("failed", (message) => {
    if (status !== null) status.textContent = "Reading the cluster failed (" + JSON.parse(message.data) + "); trying again…";
  });
  setInterval(tick, 1000);
})();
`
