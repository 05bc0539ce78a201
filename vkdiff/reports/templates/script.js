/* vkdiff report: sortable tables, row filters, copy buttons. No network, no dependencies. */
(function () {
  "use strict";
  function cellValue(row, index) {
    var cell = row.children[index];
    if (!cell) return "";
    return cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
  }
  var NUM = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;
  function compare(a, b) {
    if (NUM.test(a) && NUM.test(b)) return parseFloat(a) - parseFloat(b);
    return a.localeCompare(b, undefined, { numeric: true, sensitivity: "base" });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, index) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var desc = th.classList.contains("asc");
        heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(desc ? "desc" : "asc");
        var rows = Array.prototype.slice.call(body.rows).filter(function (r) {
          if (r.classList.contains("group-row")) { r.classList.add("hidden"); return false; }
          return true;
        });
        rows.sort(function (r1, r2) {
          var c = compare(cellValue(r1, index), cellValue(r2, index));
          return desc ? -c : c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.querySelectorAll("input[data-filter]").forEach(function (input) {
    var selector = input.getAttribute("data-filter");
    input.addEventListener("input", function () {
      var terms = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      document.querySelectorAll(selector).forEach(function (row) {
        var text = (row.textContent + " " + (row.getAttribute("title") || "")).toLowerCase();
        row.querySelectorAll("[title]").forEach(function (el) { text += " " + el.getAttribute("title").toLowerCase(); });
        var keep = terms.every(function (t) { return text.indexOf(t) >= 0; });
        row.classList.toggle("hidden", !keep);
      });
    });
  });
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      var text = source ? source.textContent : "";
      function done() { button.classList.add("done"); button.textContent = "copied"; setTimeout(function () { button.classList.remove("done"); button.textContent = "copy"; }, 1500); }
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, function () { fallback(); });
      } else { fallback(); }
      function fallback() {
        var area = document.createElement("textarea");
        area.value = text; document.body.appendChild(area); area.select();
        try { document.execCommand("copy"); done(); } catch (e) { /* leave the text selectable */ }
        document.body.removeChild(area);
      }
    });
  });
  document.documentElement.classList.add("js-ready");
})();
