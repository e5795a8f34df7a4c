// What tests/test_book_browser.py asks of one rendered page. Evaluated in the page after it settled
// (MathJax done); returns {key: [finding, ...]} plus counts. Keep in step with book/_static/sigprop.js.
(() => {
  const article = document.querySelector(".bd-article") || document.body;
  const short = (s, n = 90) => (s || "").replace(/\s+/g, " ").trim().slice(0, n);
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  const where = el => {
    const box = el.closest("[id]");
    return box ? `#${box.id}` : el.tagName.toLowerCase();
  };
  const out = {math_errors: [], raw_markup: [], unfolded: [], folded: 0, figures: [], tables: [], overflow: []};

  // ---------------------------------------------------------------- MathJax
  for (const e of document.querySelectorAll("mjx-merror")) {
    out.math_errors.push(`${short(e.getAttribute("data-mjx-error") || e.textContent)} in ${where(e)}`);
  }
  for (const e of article.querySelectorAll("span.math, div.math")) {
    if (!e.querySelector("mjx-container") && /\\\(|\\\[|\$/.test(e.textContent)) {
      out.math_errors.push(`not typeset: ${short(e.textContent)}`);
    }
  }

  // ---------------------------------------------------------------- raw markup printed as text
  const skip = "code, pre, kbd, samp, script, style, textarea, mjx-container, .math, .highlight, .sig";
  const rawTex = /\$[^$\s][^$]{0,200}?[\\^_{}][^$]{0,200}?\$|\\(alpha|beta|gamma|rho|sigma|theta|frac|sqrt|mathbb|mathrm|operatorname)\b/;
  const rawTable = /\|\s*:?-{3,}:?\s*\|/;
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip) || !visible(parent)) continue;
    const text = node.textContent;
    const m = text.match(rawTex) || text.match(rawTable);
    if (m) out.raw_markup.push(`"${short(text.slice(Math.max(0, m.index - 30), m.index + 60))}" in ${where(parent)}`);
  }

  // ---------------------------------------------------------------- folds
  // a solution: sphinx-exercise's div.solution; a proof: sphinx-proof's box whose only type class is
  // "proof" (theorems, lemmas, ... carry "proof" and their own type)
  const ownClasses = new Set(["proof", "admonition", "dropdown", "toggle", "toggle-hidden", "toggle-shown"]);
  const isProof = el => el.classList.contains("proof") && [...el.classList].every(c => ownClasses.has(c));
  for (const box of article.querySelectorAll("div.admonition")) {
    const kind = box.classList.contains("solution") ? "solution" : isProof(box) ? "proof" : null;
    if (!kind) continue;
    const title = box.querySelector(":scope > .admonition-title");
    const body = [...box.children].filter(c => !c.classList.contains("admonition-title"));
    const folded = box.classList.contains("toggle-hidden") && body.every(c => !visible(c)) && title && visible(title);
    if (folded) out.folded += 1;
    else out.unfolded.push(`${kind} ${short(title ? title.textContent : "(no title)", 50)} ${where(box)}`);
  }

  // ---------------------------------------------------------------- figures
  for (const fig of article.querySelectorAll("figure")) {
    const cap = fig.querySelector("figcaption");
    const number = cap && cap.querySelector(".caption-number");
    const text = cap ? short(cap.textContent.replace(number ? number.textContent : "", "")) : "";
    if (!number || !/\d/.test(number.textContent)) out.figures.push(`unnumbered figure ${where(fig)}: ${text || "(no caption)"}`);
    else if (text.length < 10) out.figures.push(`figure ${short(number.textContent)} without a caption`);
  }
  for (const img of article.querySelectorAll(".cell_output img")) {
    if (!img.closest("figure") && visible(img)) out.figures.push(`output image outside a figure ${where(img)}`);
  }

  // ---------------------------------------------------------------- tables and code
  const scrolls = el => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const articleRight = article.getBoundingClientRect().right;
  for (const table of article.querySelectorAll("table")) {
    if (!visible(table) || table.closest("mjx-container")) continue;
    let box = table.parentElement;
    while (box && box !== article && !scrolls(box)) box = box.parentElement;
    const label = short((table.querySelector("caption") || table.querySelector("th, td") || table).textContent, 40);
    if (!box || box === article) {
      if (table.getBoundingClientRect().right > articleRight + 1) out.tables.push(`table "${label}" overflows the column without scrolling`);
      continue;
    }
    if (box.scrollWidth > box.clientWidth + 1) {
      const hint = box.previousElementSibling;
      const hinted = box.classList.contains("sp-overflows") && hint && hint.classList.contains("sp-scroll-hint") && visible(hint);
      if (!hinted) out.tables.push(`table "${label}" scrolls (${box.scrollWidth} px in ${box.clientWidth} px) without a scroll hint`);
    }
  }
  for (const pre of article.querySelectorAll("pre")) {
    if (visible(pre) && pre.scrollWidth > pre.clientWidth + 1 && !scrolls(pre)) {
      out.overflow.push(`code cut at the column edge: "${short(pre.textContent, 50)}"`);
    }
  }
  const doc = document.scrollingElement || document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1) out.overflow.push(`page ${doc.scrollWidth} px wide in a ${window.innerWidth} px window`);
  return out;
})()
