// tssb web: the page. Everything shown comes from the mesh or the host and is
// untrusted: it is only ever put into the page with textContent (no innerHTML).
"use strict";
(function () {
  const TRAFFIC_ROWS = 500;   // rows kept in the traffic table (the server keeps as many)
  const PAGE = 30;            // posts per request
  const MAX_POST_BYTES = 2048; // server.MAX_POST_BYTES
  const RECONNECT_MS = [500, 1000, 2000, 5000, 10000];

  const STAGES = [["stored", "stored"], ["board", "on the board"], ["announced", "asked for"],
    ["fetched", "fetched by a neighbour"], ["delivered", "\u2714 delivered to"], ["read", "\u2714\u2714 read by"]];
  const S = {
    csrf: null, me: null, mode: null, feeds: new Map(), selected: null, chat: null, chats: [],
    readSeen: new Set(),
    shownFront: 0, oldest: null, loading: false, skew: 0, status: null,
    syncs: [], gaps: 0, paused: false, tries: 0,
  };
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function row(cells, cls) {
    const tr = el("tr", cls);
    for (const c of cells) {
      const td = el("td", c && c.cls, c && typeof c === "object" ? c.text : c);
      tr.appendChild(td);
    }
    return tr;
  }
  const num = (v) => ({ text: v === null || v === undefined ? "" : v, cls: "num" });
  const short = (hex) => (typeof hex === "string" ? hex.slice(0, 8) : "");
  function feedLabel(fid) {
    const f = S.feeds.get(fid);
    return f && f.name ? f.name + " (" + short(fid) + ")" : short(fid);
  }
  function clock(ms) {
    const d = new Date(ms);
    const p = (n) => String(n).padStart(2, "0");
    return p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
  }
  function ago(ms) {
    if (!ms) return "";
    const s = Math.max(0, Math.round((Date.now() + S.skew - ms) / 1000));
    return s < 90 ? s + " s ago" : s < 5400 ? Math.round(s / 60) + " min ago" : Math.round(s / 3600) + " h ago";
  }
  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
  }

  // -- views -----------------------------------------------------------------------
  function showView() {
    const name = (location.hash || "#feeds").slice(1);
    const known = document.getElementById("view-" + name) ? name : "feeds";
    for (const v of document.querySelectorAll(".view")) v.classList.toggle("current", v.id === "view-" + known);
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("current", a.getAttribute("href") === "#" + known);
  }
  window.addEventListener("hashchange", showView);

  // -- feeds and posts -------------------------------------------------------------
  function renderFeeds() {
    const list = [...S.feeds.values()].sort((a, b) =>
      (b.own - a.own) || (b.updated - a.updated) || (a.fid < b.fid ? -1 : 1));
    const items = list.map((f) => {
      const li = el("li", f.fid === S.selected ? "current" : "");
      li.dataset.fid = f.fid;
      li.appendChild(el("span", "name", f.name || short(f.fid)));
      if (f.own) li.appendChild(el("span", "badge", "this host"));
      if (f.forks && f.forks.length) li.appendChild(el("span", "badge fork",
        "forked at seq " + f.forks.join(", ")));
      let meta = short(f.fid) + " \u00b7 " + f.front + (f.front === 1 ? " entry" : " entries");
      if (f.missing) meta += " \u00b7 " + f.missing + " chunks missing";
      li.appendChild(el("span", "meta", meta));
      li.addEventListener("click", () => select(f.fid));
      return li;
    });
    $("feed-list").replaceChildren(...items);
  }

  function postItem(p, fresh, withChat = true) {
    const li = el("li", "kind-" + p.kind + (fresh ? " new" : ""));
    li.dataset.seq = p.seq;
    const head = el("div", "head");
    head.appendChild(el("span", "seq", "#" + p.seq));
    head.appendChild(el("span", "author", p.author));
    if (p.tag) head.appendChild(el("span", "tag", p.tag));
    if (p.kind !== "text") head.appendChild(el("span", "kind", p.kind));
    if (typeof p.ts === "number" && p.ts > 0) head.appendChild(el("span", "ts", new Date(p.ts * 1000).toLocaleString()));
    if (p.length > 48) head.appendChild(el("span", "len", p.have < p.length ? p.have + " of " + p.length + " bytes" : p.length + " bytes"));
    li.appendChild(head);
    const text = el("p", "text");
    if (p.chat && withChat) text.appendChild(el("span", "chat", p.chat.title + " "));
    text.appendChild(document.createTextNode(p.voice && p.text.indexOf("<voice") !== 0 ? p.text + " <+ voice message>" : p.text));
    li.appendChild(text);
    if (p.stages) li.appendChild(el("div", "stages", stageText(p.stages)));
    return li;
  }

  // what a post of ours was seen to reach (tssb.chat.delivery): only stages observed
  function stageText(st) {
    const out = [];
    for (const [k, label] of STAGES) {
      const v = st[k];
      if (v === undefined) continue;
      out.push(Array.isArray(v) ? label + " " + v.join(", ") : label);
    }
    return out.join(" \u00b7 ");
  }

  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin" });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }

  async function select(fid) {
    S.selected = fid;
    S.shownFront = 0;
    S.oldest = null;
    $("posts").replaceChildren();
    $("posts-title").textContent = "Posts of " + feedLabel(fid);
    renderFeeds();
    await loadOlder();
  }

  async function loadOlder() {
    const fid = S.selected;
    if (!fid || S.loading) return;
    S.loading = true;
    try {
      let url = "/api/posts?feed=" + fid + "&limit=" + PAGE;
      if (S.oldest !== null) url += "&before=" + S.oldest;
      const got = await getJSON(url);
      if (fid !== S.selected) return;
      if (got.sealed) $("posts-title").textContent = "Posts of " + feedLabel(fid) + " (" + got.sealed + " private posts not for us)";
      for (const p of got.posts) {
        $("posts").appendChild(postItem(p, false));
        S.shownFront = Math.max(S.shownFront, p.seq);
        S.oldest = S.oldest === null ? p.seq : Math.min(S.oldest, p.seq);
      }
      $("older").hidden = !(S.oldest > 1);
    } catch (e) {
      $("posts-title").textContent = "Posts: " + e.message;
    } finally {
      S.loading = false;
    }
  }

  async function loadNewer() {
    const fid = S.selected;
    const f = S.feeds.get(fid);
    if (!f || f.front <= S.shownFront || S.loading) return;
    S.loading = true;
    try {
      const n = Math.min(f.front - S.shownFront, 100);
      const got = await getJSON("/api/posts?feed=" + fid + "&limit=" + n);
      if (fid !== S.selected) return;
      const list = $("posts");
      for (const p of got.posts.filter((p) => p.seq > S.shownFront).reverse()) {
        list.insertBefore(postItem(p, true), list.firstChild);
        if (S.oldest === null) S.oldest = p.seq;
      }
      for (const p of got.posts) S.shownFront = Math.max(S.shownFront, p.seq);
    } catch (e) {
      $("posts-title").textContent = "Posts: " + e.message;
    } finally {
      S.loading = false;
    }
    if (S.feeds.get(fid).front > S.shownFront) loadNewer();
  }

  function mergeFeeds(list) {
    let selectedGrew = false;
    for (const f of list) {
      S.feeds.set(f.fid, f);
      if (f.fid === S.selected && f.front > S.shownFront) selectedGrew = true;
    }
    renderFeeds();
    if (!S.selected && S.feeds.size) select(S.me && S.feeds.has(S.me.fid) ? S.me.fid : [...S.feeds.keys()][0]);
    else if (selectedGrew) loadNewer();
  }

  function bytesOf(text) { return new TextEncoder().encode(text).length; }
  function countBytes(input, counter) {
    $(input).addEventListener("input", () => {
      const n = bytesOf($(input).value);
      $(counter).textContent = n ? n + " / " + MAX_POST_BYTES + " bytes" : "";
    });
  }
  // a state-changing request: same origin, the CSRF token, JSON both ways
  async function postJSON(url, obj) {
    const r = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": S.csrf || "" },
      body: JSON.stringify(obj),
    });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }
  countBytes("post-text", "post-count");
  $("post-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = $("post-text").value;
    const msg = $("post-msg");
    msg.className = "";
    if (!text.trim()) { msg.className = "error"; msg.textContent = "nothing to post"; return; }
    $("post-send").disabled = true;
    try {
      const body = await postJSON("/api/post", { text: text });
      $("post-text").value = "";
      $("post-count").textContent = "";
      msg.textContent = "posted #" + body.seq;
      const f = S.feeds.get(body.fid);
      if (f && f.front < body.seq) { f.front = body.seq; }
      if (S.selected !== body.fid) await select(body.fid); else await loadNewer();
    } catch (e) {
      msg.className = "error";
      msg.textContent = "not posted: " + e.message;
    } finally {
      $("post-send").disabled = false;
    }
  });
  $("older").addEventListener("click", loadOlder);

  // -- chats -----------------------------------------------------------------------
  async function loadChats() {
    try {
      const got = await getJSON("/api/chats");
      S.chats = got.chats;
      $("chat-sealed").textContent = got.sealed ? got.sealed + " private posts not addressed to us" : "";
      renderChats();
      if (S.chat === null) selectChat("public");
    } catch (e) {
      $("chat-sealed").textContent = "chats: " + e.message;
    }
  }
  function renderChats() {
    $("chat-list").replaceChildren(...S.chats.map((c) => {
      const li = el("li", c.key === S.chat ? "current" : "");
      li.appendChild(el("span", "name", c.title));
      if (c.posts !== null) li.appendChild(el("span", "meta", c.posts + (c.posts === 1 ? " post" : " posts") +
        (c.last_ts ? " \u00b7 " + new Date(c.last_ts * 1000).toLocaleString() : "")));
      li.addEventListener("click", () => selectChat(c.key));
      return li;
    }));
  }
  async function selectChat(key) {
    S.chat = key;
    renderChats();
    const c = S.chats.find((x) => x.key === key);
    $("chat-title").textContent = c ? c.title : key === "public" ? "public" : "new private chat";
    $("chat-label").textContent = key === "public" ? "Post publicly (the app's public chat)" : "Write privately to this chat";
    await loadChat();
  }
  async function loadChat() {
    const key = S.chat;
    if (key === null) return;
    const c = S.chats.find((x) => x.key === key);
    if (!c && key !== "public") { $("chat-posts").replaceChildren(); return; }
    try {
      const got = await getJSON("/api/chat?key=" + encodeURIComponent(key) + "&limit=" + PAGE);
      if (key !== S.chat) return;
      $("chat-posts").replaceChildren(...got.posts.map((p) => postItem(p, false, false)));
      const others = got.posts.filter((p) => p.private === "open" && (!S.me || p.fid !== S.me.fid));
      if (key !== "public" && others.some((p) => !S.readSeen.has(p.fid + "/" + p.seq))) {
        // shown: read receipts for them (the server sends each once)
        for (const p of others) S.readSeen.add(p.fid + "/" + p.seq);
        await postJSON("/api/read", { key: key, limit: PAGE });
      }
    } catch (e) {
      $("chat-title").textContent = "Chat: " + e.message;
    }
  }
  let chatTimer = null;
  function chatsChanged() {   // new entries: refresh the list and the open chat, at most 1/s
    if (chatTimer !== null) return;
    chatTimer = setTimeout(async () => { chatTimer = null; await loadChats(); await loadChat(); }, 1000);
  }
  function memberIds(text) {   // names (as the feed list shows them) or 64-hex feed ids
    const out = [];
    for (const w of text.split(",").map((x) => x.trim()).filter((x) => x)) {
      if (/^[0-9a-f]{64}$/i.test(w)) { out.push(w.toLowerCase()); continue; }
      const hits = [...S.feeds.values()].filter((f) => f.name === w || (w.length >= 8 && f.fid.startsWith(w.toLowerCase())));
      if (hits.length !== 1) throw new Error((hits.length ? "more than one feed" : "no feed") + " matches " + w);
      out.push(hits[0].fid);
    }
    return out;
  }
  $("newchat-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const msg = $("newchat-msg");
    msg.className = "";
    try {
      const ids = memberIds($("newchat-to").value).filter((f) => !S.me || f !== S.me.fid);
      if (!ids.length) throw new Error("name at least one member");
      if (ids.length > 6) throw new Error("at most 6 others (the app opens 7 slots)");
      const key = ids.concat(S.me ? [S.me.fid] : []).sort().join(",");
      msg.textContent = "";
      selectChat(key);
    } catch (e) {
      msg.className = "error";
      msg.textContent = e.message;
    }
  });
  countBytes("chat-text", "chat-count");
  $("chat-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = $("chat-text").value;
    const msg = $("chat-msg");
    msg.className = "";
    const key = S.chat;
    if (!text.trim() || key === null) { msg.className = "error"; msg.textContent = "nothing to send"; return; }
    const body = { text: text };
    if (key !== "public") body.to = key.split(",").filter((f) => !S.me || f !== S.me.fid);
    if (key !== "public" && !body.to.length) body.to = [S.me.fid];   // notes to yourself
    $("chat-send").disabled = true;
    try {
      const got = await postJSON(key === "public" ? "/api/post" : "/api/dm", body);
      $("chat-text").value = "";
      $("chat-count").textContent = "";
      msg.textContent = "sent #" + got.seq;
      if (got.warning) { msg.className = "warning"; msg.textContent += ". Warning: " + got.warning; }
      await loadChats();
      if (got.chat && got.chat !== S.chat) await selectChat(got.chat); else await loadChat();
    } catch (e) {
      msg.className = "error";
      msg.textContent = "not sent: " + e.message;
    } finally {
      $("chat-send").disabled = false;
    }
  });

  // -- traffic ---------------------------------------------------------------------
  function trafficRow(r) {
    let seq = r.seq === undefined || r.seq === null ? "" : String(r.seq);
    if (r.cnr !== undefined && r.cnr !== null) seq += "/" + r.cnr;
    let result = r.outcome || "";
    if (r.reason) result += ": " + r.reason;
    if (r.note) result += " (" + r.note + ")";
    const tr = row([clock(r.ts), r.dir, r.src, r.kind, r.feed ? feedLabel(r.feed) : "", seq,
      num(r.len), num(r.rssi), num(r.snr), result], r.outcome || "");
    if (r.id) tr.dataset.id = r.id;
    return tr;
  }
  function addRows(rows) {
    const body = $("traffic-table").tBodies[0];
    const only = $("drops-only").checked;
    const frag = document.createDocumentFragment();
    for (let i = rows.length - 1; i >= 0; i--) {
      if (only && rows[i].outcome !== "dropped") continue;
      frag.appendChild(trafficRow(rows[i]));
    }
    body.insertBefore(frag, body.firstChild);
    while (body.rows.length > TRAFFIC_ROWS) body.deleteRow(-1);
  }
  function onPacket(r) {
    S.traffic.push(r);
    if (S.traffic.length > TRAFFIC_ROWS) S.traffic.shift();
    if (!S.paused) addRows([r]);
  }
  function redrawTraffic() {
    $("traffic-table").tBodies[0].replaceChildren();
    addRows(S.traffic);
  }
  $("drops-only").addEventListener("change", redrawTraffic);
  $("pause").addEventListener("change", () => {
    S.paused = $("pause").checked;
    if (!S.paused) redrawTraffic();
  });

  // -- status: neighbours, GOSET, airtime, board -------------------------------------
  function renderStatus() {
    const st = S.status;
    if (!st) return;
    fill($("neighbours-table").tBodies[0], st.neighbours.map((n) => row([
      n.src, num(n.packets), num(n.bytes), num(n.rssi), num(n.snr), ago(n.last),
      Object.entries(n.kinds).map(([k, v]) => k + " " + v).join(", ")])));

    const g = st.goset;
    $("goset-summary").textContent = "This host's GOSET: " + g.count + " feeds, state " +
      short(g.state) + "\u2026";
    fill($("agreement").tBodies[0], st.neighbours.map((n) => row([
      n.src, { text: n.agree, cls: n.agree }, n.claim ? n.claim.cnt + " keys" : "",
      n.claim ? short(n.claim.xor) : "", n.claim ? ago(n.claim.ts) : (n.state_ts ? ago(n.state_ts) : "")])));
    fill($("replication").tBodies[0], g.keys.map((fid) => {
      const f = S.feeds.get(fid);
      const ours = f ? f.front : 0;
      const peers = Object.values(st.fronts[fid] || {});
      const best = peers.length ? Math.max(...peers) : null;
      let state = "complete";
      if (best !== null && best > ours) state = "behind by " + (best - ours);
      else if (f && f.missing) state = "side chains incomplete";
      else if (best !== null && best < ours) state = "peers behind";
      else if (best === null) state = "no peer front heard";
      return row([feedLabel(fid), num(ours), num(best), num(f ? f.missing : null), state]);
    }));

    const b = st.board || {};
    const p = b.plan;
    const a = st.airtime;
    if (p) {
      $("plan").textContent = "Region plan " + p.name + " (" + p.rule + ", SF" + p.sf + ", " +
        p.bw / 1000 + " kHz): " + (p.budget_ms ? p.duty_permille / 10 + " % duty cycle = " +
        p.budget_ms / 1000 + " s of airtime per hour" : "no duty-cycle limit") +
        (p.dwell_ms ? ", at most " + p.dwell_ms + " ms per frame" : "") + ".";
    } else {
      $("plan").textContent = "Region plan unknown (no board status yet; tssb web --plan NAME sets it).";
    }
    let pct = 0;
    if (p && p.budget_ms) pct = Math.min(100, 100 * a.used_ms / p.budget_ms);
    else if (p && p.dwell_ms) pct = Math.min(100, 100 * a.longest_ms / p.dwell_ms);
    $("airtime-bar").style.width = pct.toFixed(1) + "%";
    $("airtime-bar").classList.toggle("high", pct > 80);
    let text = "Board airtime in the last hour: " + (a.used_ms / 1000).toFixed(2) + " s in " +
      a.frames + " frames" + (p && p.budget_ms ? " (" + pct.toFixed(1) + " % of the budget)" : "") +
      "; longest frame " + a.longest_ms + " ms; " + a.waits + " waits for duty cycle.";
    if (b.status && typeof b.status.duty_used_ms === "number") {
      text += " The board's limiter counts " + (b.status.duty_used_ms / 1000).toFixed(2) + " s.";
    }
    $("airtime-text").textContent = text;
    fill($("drops").tBodies[0], Object.entries(st.drops).sort((x, y) => y[1] - x[1])
      .map(([k, v]) => row([k, num(v)])));
    const l = b.link;
    $("link").textContent = l ? (l.connected ? "connected to " + l.port : "board not connected") +
      "; " + l.bytes_in + " bytes in, " + l.bytes_out + " bytes out; bad frames: " +
      (Object.entries(l.bad_frames).map(([k, v]) => k + " " + v).join(", ") || "none") :
      (S.mode === "alone" ? "no board in this process (tssb web --serial bridges one)" : "");
    const hello = b.hello;
    $("board").textContent = l ? "board " + (hello && hello.name ? hello.name : "?") + ": " +
      (l.connected ? "connected" : "not connected") : (S.mode === "alone" ? "store only" : "");
  }

  function renderSyncs() {
    fill($("syncs-table").tBodies[0], S.syncs.slice().reverse().map((s) => row([
      clock(s.ts), s.proto, short(s.peer), { text: s.ok ? "ok" : "failed" + (s.reason ? ": " + s.reason : ""), cls: s.ok ? "yes" : "no" },
      s.mode, num(s.rounds), num(s.bytes_sent), num(s.bytes_recv), num(s.elements_sent),
      num(s.elements_recv), num(s.duration_ms === undefined ? null : Math.round(s.duration_ms))])));
  }

  // -- live connection ---------------------------------------------------------------
  function applyState(st) {
    S.csrf = st.csrf || S.csrf;
    S.me = st.me;
    S.mode = st.mode;
    $("me").textContent = "host " + short(st.me.fid);
    S.skew = st.now - Date.now();
    S.feeds = new Map();
    mergeFeeds(st.feeds);
    S.traffic = st.traffic.slice();
    redrawTraffic();
    S.syncs = st.syncs.slice();
    renderSyncs();
    S.status = st;
    renderStatus();
  }

  function connect() {
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
    ws.onopen = () => { S.tries = 0; $("live").className = "on"; $("live").textContent = "live"; };
    ws.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      switch (m.t) {
        case "state": applyState(m); break;
        case "pkt": onPacket(m.row); break;
        case "feeds": mergeFeeds(m.feeds); chatsChanged(); break;
        case "status":
          S.skew = m.now - Date.now();
          S.status = Object.assign({}, S.status, m);
          renderStatus();
          break;
        case "sync":
          S.syncs.push(m.sync);
          if (S.syncs.length > 50) S.syncs.shift();
          renderSyncs();
          break;
        case "gap":
          S.gaps += m.skipped;
          $("traffic-note").textContent = S.gaps + " updates skipped (this browser was too slow)";
          break;
      }
    };
    ws.onclose = () => {
      $("live").className = "off";
      $("live").textContent = "reconnecting";
      setTimeout(connect, RECONNECT_MS[Math.min(S.tries++, RECONNECT_MS.length - 1)]);
    };
  }

  // the WebSocket's first message is the whole state (with the CSRF token for posting)
  S.traffic = [];
  showView();
  connect();
  loadChats();
  setInterval(renderStatus, 5000);   // keep "seconds ago" moving when nothing changes
  // the open chat's ticks move without new entries here (the board, a neighbour's WANT)
  setInterval(() => { if (location.hash === "#chats") loadChat(); }, 5000);
})();
