// A lease's logs: the last lines (GET /v1/lease/{id}/logs?tail=N&timestamps=true), then, while the lease is
// live and "Follow" is ticked, every 2 s the lines since the last one shown (`since`: lines at exactly that time
// come again, so those already shown are skipped, as `leasectl logs --follow` does).

import { call, explain, poller } from "./api.js";
import { byId, clock, say } from "./dom.js";

const FOLLOW_MS = 2000;
const KEEP_LINES = 5000;
const FOLLOWED = new Set(["active", "releasing"]);
const NO_WORKER_YET = new Set(["queued", "pending"]);

function stamp(line) {
  const space = line.indexOf(" ");
  return space > 0 ? line.slice(0, space) : null;
}

export function createLogs() {
  const output = byId("logs-text");
  const status = byId("logs-status");
  const follow = byId("logs-follow");
  const tail = byId("logs-tail");
  let leaseId = null;
  let lease = null;
  let lines = [];
  let lastStamp = null;
  let atLastStamp = new Set();
  let loaded = false;
  let finished = false;
  let paused = false;

  function render() {
    const pinned = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
    if (lines.length > KEEP_LINES) lines = lines.slice(-KEEP_LINES);
    output.textContent = lines.join("\n");
    if (pinned) output.scrollTop = output.scrollHeight;
  }

  function take(text) {
    let added = 0;
    for (const line of text.split("\n")) {
      if (!line) continue;
      const at = stamp(line);
      if (at !== null && at === lastStamp && atLastStamp.has(line)) continue;
      if (at !== lastStamp) {
        lastStamp = at;
        atLastStamp = new Set();
      }
      atLastStamp.add(line);
      lines.push(line);
      added += 1;
    }
    return added;
  }

  async function read() {
    if (!lease || finished) return;
    const mine = leaseId;
    const query = loaded && lastStamp ? { since: lastStamp, timestamps: true } : { tail: tail.value, timestamps: true };
    try {
      const answer = await call(`v1/lease/${encodeURIComponent(mine)}/logs`, { query, owner: lease.owner_id, asText: true });
      if (mine !== leaseId) return;
      const added = take(answer.text);
      loaded = true;
      render();
      const cut = answer.headers.get("X-Logs-Truncated") === "true" ? " (older lines left out)" : "";
      const following = follow.checked && FOLLOWED.has(lease.status) ? "following" : "not following";
      say(status, `${lines.length} lines${cut} · ${added} new · ${following} · ${clock()}`);
    } catch (failure) {
      if (mine !== leaseId) return;
      if (failure.status === 409) {
        say(status, "No worker yet: its output appears once the worker exists.");
        return;
      }
      if (failure.status === 410) finished = true;
      say(status, explain(failure, "this lease's logs"), failure.status === 410 ? "info" : "error");
    }
  }

  const reader = poller(read, FOLLOW_MS);

  function again() {
    lines = [];
    lastStamp = null;
    atLastStamp = new Set();
    loaded = false;
    finished = false;
    output.textContent = "";
    reader.start();
  }

  follow.addEventListener("change", () => {
    if (follow.checked && lease && FOLLOWED.has(lease.status)) reader.start();
    else reader.stop();
  });
  tail.addEventListener("change", again);

  return {
    reset(id) {
      reader.stop();
      leaseId = id;
      lease = null;
      lines = [];
      lastStamp = null;
      atLastStamp = new Set();
      loaded = false;
      finished = false;
      paused = false;
      output.textContent = "";
      say(status, "Loading…");
    },
    // The lease as last read: the first read of the logs, then following while it is live. A lease with no worker
    // yet, or none any more, is not asked (its answer would be 409 or 410: what its status already says).
    update(current) {
      const first = lease === null;
      lease = current;
      if (NO_WORKER_YET.has(lease.status)) {
        say(status, "No worker yet: its output shows once the worker exists.");
        return;
      }
      if (!FOLLOWED.has(lease.status) && !loaded) {
        reader.stop();
        say(status, `The lease is ${lease.status}: its worker was removed, and its output with it.`);
        return;
      }
      if (first || (!loaded && !finished) || paused) {
        paused = false;
        if (follow.checked && FOLLOWED.has(lease.status)) reader.start();
        else if (!loaded) read();
      } else if (!FOLLOWED.has(lease.status)) {
        reader.stop();
        say(status, `${lines.length} lines · not following: the lease is ${lease.status}, its worker gone`);
      }
    },
    stop() {
      reader.stop();
    },
    // Stopped while the worker is being removed (a release from this view: a read then would be answered 410);
    // the next update() follows again if the lease is still live.
    pause() {
      reader.stop();
      paused = true;
    },
  };
}
