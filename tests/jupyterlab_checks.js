// What tests/test_book_browser.py asks of a built notebook open in JupyterLab (book/notebooks.py): evaluated once
// the notebook's cells are rendered and MathJax has typeset them; returns {key: [finding, ...]} plus counts.
(() => {
  const short = (s, n = 90) => (s || "").replace(/\s+/g, " ").trim().slice(0, n);
  const rendered = [...document.querySelectorAll(".jp-MarkdownCell .jp-RenderedMarkdown")];
  const out = {cells: document.querySelectorAll(".jp-Notebook .jp-Cell").length, markdown: rendered.length,
               formulas: 0, math_errors: [], raw_tex: [], raw_myst: [], details: 0, open_details: 0, boxes: 0,
               links: 0, local_links: [], empty_links: []};
  for (const md of rendered) {
    out.formulas += md.querySelectorAll("mjx-container").length;
    for (const e of md.querySelectorAll("mjx-merror")) out.math_errors.push(short(e.getAttribute("data-mjx-error") || e.textContent));
    // text outside code and formulas: TeX left untypeset, MyST left as written
    const walker = document.createTreeWalker(md, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (!parent || parent.closest("code, pre, mjx-container")) continue;
      const text = node.textContent;
      let m = text.match(/\$[^$\s][^$]{0,200}?\$|\\(alpha|beta|gamma|rho|sigma|frac|sqrt|mathbb|mathrm|operatorname)\b/);
      if (m) out.raw_tex.push(short(text.slice(Math.max(0, m.index - 30), m.index + 60)));
      m = text.match(/\{[a-z][\w:.-]*\}$|^\s*:::|^\s*\([\w:.-]+\)=\s*$|\{\{[^}]*\}\}/m);
      if (m) out.raw_myst.push(short(text.slice(Math.max(0, m.index - 30), m.index + 60)));
    }
    // a role left as written renders as "{numref}" followed by inline code; a directive as a code block
    for (const code of md.querySelectorAll("code")) {
      const before = code.previousSibling;
      if (before && before.nodeType === 3 && /\{[a-z][\w:.-]*\}$/.test(before.textContent)) {
        out.raw_myst.push(short(before.textContent.slice(-30) + code.textContent));
      }
      if (/(^|\s)language-\{/.test(code.className)) out.raw_myst.push(`directive block ${short(code.className)}`);
    }
    out.details += md.querySelectorAll("details").length;
    out.open_details += md.querySelectorAll("details[open]").length;
    out.boxes += md.querySelectorAll("blockquote > p:first-child > strong").length;
    for (const a of md.querySelectorAll("a[href]:not(.jp-InternalAnchorLink)")) {   // not JupyterLab's heading anchors
      out.links += 1;
      if (!/^(https?:|mailto:)/.test(a.getAttribute("href"))) out.local_links.push(a.getAttribute("href"));
      if (!a.textContent.trim() && !a.querySelector("img")) out.empty_links.push(a.getAttribute("href"));
    }
  }
  return out;
})()
