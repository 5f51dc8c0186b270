// matrix-bench dashboard: draws a page's tables and charts from its embedded JSON
// (<script id="page-data" type="application/json">). No network; Chart.js is a sibling.
"use strict";

function cellText(cell) { return cell === null ? "" : String(cell[0]); }

function sortValue(cell) {
  if (cell === null || cell[1] === null || cell[1] === undefined) { return null; }
  return cell[1];
}

function compare(a, b) {
  if (a === null && b === null) { return 0; }
  if (a === null) { return 1; }  // empty cells last, whichever the direction
  if (b === null) { return -1; }
  if (typeof a === "number" && typeof b === "number") { return a - b; }
  return String(a).localeCompare(String(b));
}

function drawTable(spec) {
  const host = document.getElementById("table-" + spec.id);
  const filter = document.createElement("input");
  filter.className = "filter";
  filter.placeholder = "filter rows (any column)";
  filter.setAttribute("aria-label", "filter " + spec.caption);
  const count = document.createElement("span");
  count.className = "count";
  const wrap = document.createElement("div");
  wrap.className = "table-wrap";
  const table = document.createElement("table");
  table.id = spec.id;
  const head = table.createTHead().insertRow();
  spec.columns.forEach((column, index) => {
    const th = document.createElement("th");
    th.textContent = column.label;
    th.title = "sort by " + column.label;
    th.addEventListener("click", () => sortBy(index, th));
    head.appendChild(th);
  });
  const body = table.createTBody();
  let rows = spec.rows.slice();

  function render() {
    body.replaceChildren();
    const words = filter.value.trim().toLowerCase();
    let shown = 0;
    for (const row of rows) {
      const text = row.cells.map(cellText).join(" ").toLowerCase();
      if (words && !text.includes(words)) { continue; }
      const tr = body.insertRow();
      if (row.flagged) { tr.className = "flagged"; }
      row.cells.forEach((cell, index) => {
        const td = tr.insertCell();
        const column = spec.columns[index];
        if (column.numeric) { td.className = "num"; }
        if (column.key === "flags") { td.className = "flags"; }
        if (column.link && row.links && row.links[column.key]) {
          const a = document.createElement("a");
          a.href = row.links[column.key];
          a.textContent = cellText(cell);
          td.appendChild(a);
        } else {
          td.textContent = cellText(cell);
        }
      });
      shown += 1;
    }
    count.textContent = shown + " of " + rows.length + " rows";
  }

  function sortBy(index, th) {
    const ascending = th.getAttribute("aria-sort") !== "ascending";
    head.querySelectorAll("th").forEach((other) => other.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    rows = spec.rows.slice().sort((x, y) => {
      const a = sortValue(x.cells[index]);
      const b = sortValue(y.cells[index]);
      if (a === null || b === null) { return compare(a, b); }
      return ascending ? compare(a, b) : compare(b, a);
    });
    render();
  }

  filter.addEventListener("input", render);
  host.append(filter, count, wrap);
  wrap.appendChild(table);
  render();
}

function scales(spec) {
  // the category (or device count) axis, and the value axis from zero
  const along = { type: spec.type === "scatter" ? "linear" : "category",
                  title: { display: true, text: spec.xLabel },
                  ticks: { autoSkip: !spec.horizontal, maxRotation: 50, font: { size: 11 } } };
  if (spec.type === "scatter") {  // device counts: whole numbers from zero
    Object.assign(along, { min: 0, suggestedMax: 2, ticks: { precision: 0, stepSize: 1 } });
  }
  const value = { beginAtZero: true, title: { display: true, text: spec.yLabel },
                  ticks: { font: { size: 11 } } };
  return spec.horizontal ? { y: along, x: value } : { x: along, y: value };
}

function drawChart(spec) {
  const canvas = document.getElementById("chart-" + spec.id);
  const datasets = spec.datasets.map((d) => ({
    label: d.label, data: d.data, tips: d.tips || [],
    borderDash: d.dashed ? [6, 4] : [], pointRadius: d.dashed ? 0 : 4,
    showLine: spec.type === "scatter" ? true : undefined,
    fill: false,
  }));
  const chart = new Chart(canvas, {
    type: spec.type,
    data: { labels: spec.labels, datasets: datasets },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      interaction: { mode: "nearest", intersect: true },
      plugins: {
        legend: { display: spec.datasets.length > 1, position: "bottom",
                  labels: { boxWidth: 12, font: { size: 11 } } },
        tooltip: { callbacks: {
          afterLabel: (context) => context.dataset.tips[context.dataIndex] || "" } },
      },
      indexAxis: spec.horizontal ? "y" : "x",
      scales: scales(spec),
    },
  });
  window.matrixCharts[spec.id] = chart;
}

window.matrixCharts = {};
document.addEventListener("DOMContentLoaded", () => {
  const page = JSON.parse(document.getElementById("page-data").textContent);
  page.tables.forEach(drawTable);
  page.charts.forEach(drawChart);
  document.body.dataset.drawn = "yes";
});
