# Turns bench/run.sh's measurements into bench/results-latest.md.
# Input: the runs CSV (round,id,clients,synchronous_commit,tps,latency_ms,
# transactions,failed,pgbench_rc,wal_bytes,rows_updated,hot_updated,
# others_cpu_pct,steal_pct,build). A run of the baseline build (build
# "baseline") counts as workload id "<id>/base". Variables: seconds, rounds,
# machine, date, extension, baseline (empty without one), nice, halt_poll,
# elapsed, load_start, load_end, settings, storage_keys, memory_calls,
# workloads_file, storage_file, memory_file, schema_file, cost_file, redis
# (how the Redis workloads ran; empty without them).

function fmt_ratio(r) { return sprintf("%.2f×", r) }
function cell(id, c, s) { return ((id, c, s) in tps) }
function label(c, s) { return "sync " s ", " c " client" (c == 1 ? "" : "s") }

# A goal on a ratio a/b over the given cells: ratio >= target (dir "min")
# or ratio <= target (dir "max"), or no goal (dir ""): a ratio shown for
# comparison. cls: the client counts it covers ("8 32"; empty: all). Prints
# one goals-table row.
function ratio_goal(name, target_text, a, b, syncs, target, dir, cls,    ns, s_list, i, j, c, s, r, worst, worst_at, text, n, sep, met, miss, nc, c_list) {
  ns = split(syncs, s_list, " ")
  nc = split(cls == "" ? "1 8 32" : cls, c_list, " ")
  text = ""; n = 0
  for (i = 1; i <= ns; i++) {
    s = s_list[i]; sep = ""
    text = text (i > 1 ? "; " : "") s ": "
    for (j = 1; j <= nc; j++) {
      c = c_list[j]
      if (!cell(a, c, s) || !cell(b, c, s) || tps[b, c, s] == 0) { text = text sep "–"; sep = " / "; continue }
      r = tps[a, c, s] / tps[b, c, s]
      text = text sep sprintf("%.2f", r); sep = " / "
      if (n == 0 || (dir == "min" && r < worst) || (dir == "max" && r > worst)) { worst = r; worst_at = label(c, s) }
      n++
    }
  }
  if (n == 0) { printf "| %s | %s | not measured | – |\n", name, target_text; return }
  if (dir == "") { printf "| %s | %s | %s | for comparison (no goal) |\n", name, target_text, text; return }
  met = (dir == "min") ? (worst >= target - 1e-9) : (worst <= target + 1e-9)
  if (met)
    miss = sprintf("**met** (worst %s, %s; margin %+.0f%%)", fmt_ratio(worst), worst_at,
                   (dir == "min" ? (worst / target - 1) * 100 : (target / worst - 1) * 100))
  else if (dir == "min")
    miss = sprintf("**missed**: worst %s (%s) needs %+.0f%% throughput", fmt_ratio(worst), worst_at, (target / worst - 1) * 100)
  else
    miss = sprintf("**missed**: worst %s (%s) is %.0f%% over", fmt_ratio(worst), worst_at, (worst / target - 1) * 100)
  printf "| %s | %s | %s | %s |\n", name, target_text, text, miss
}

# The section comparing this build with the baseline build, cell by cell:
# this build's tps / the baseline's, for every workload run on both, and the
# median of those cell ratios.
function baseline_section(    k, id, nid, i, j, c, s, r, n, rs, a, b, t, med) {
  print ""
  print "## This build against the baseline build"
  print ""
  print "Each cell: this build's transactions/s divided by the baseline build's, same workload, clients and"
  print "synchronous_commit (above 1: this build is faster). The two runs of a cell ran back to back, so both"
  print "saw about the same machine. The last column is the median of the six cells."
  print ""
  printf "| # | workload |"
  for (i = 1; i <= nsyncs; i++) for (j = 1; j <= nclients; j++) printf " sync %s, %s cl. |", syncs[i], clients[j]
  print " median |"
  printf "|---|---|"
  for (i = 1; i <= nsyncs * nclients + 1; i++) printf "---:|"
  print ""
  for (k = 1; k <= nw; k++) {
    id = wid[k]
    if (id !~ /\/base$/) continue
    nid = substr(id, 1, length(id) - 5)
    n = 0
    for (i = 1; i <= nsyncs; i++) for (j = 1; j <= nclients; j++) if (cell(id, clients[j], syncs[i])) n++
    if (n == 0) continue
    n = 0
    printf "| %s | %s |", nid, wdesc[nid]
    for (i = 1; i <= nsyncs; i++) for (j = 1; j <= nclients; j++) {
      c = clients[j]; s = syncs[i]
      if (!cell(id, c, s) || !cell(nid, c, s) || tps[id, c, s] == 0) { printf " – |"; continue }
      r = tps[nid, c, s] / tps[id, c, s]
      rs[++n] = r
      printf " %.2f%s |", r, ((others_max[id, c, s] > 10 || others_max[nid, c, s] > 10) ? " †" : "")
    }
    for (a = 2; a <= n; a++) for (b = a; b > 1 && rs[b - 1] > rs[b]; b--) { t = rs[b]; rs[b] = rs[b - 1]; rs[b - 1] = t }
    med = (n == 0) ? "–" : sprintf("%.2f", (n % 2) ? rs[(n + 1) / 2] : (rs[n / 2] + rs[n / 2 + 1]) / 2)
    printf " %s |\n", med
  }
}

BEGIN {
  nclients = split("1 8 32", clients, " ")
  nsyncs = split("on off", syncs, " ")
  nw = 0
  while ((getline line < workloads_file) > 0) {
    split(line, f, "|"); nw++; wid[nw] = f[1]; wdesc[f[1]] = f[3]
  }
}
NR > 1 {
  id = ($15 == "baseline") ? $2 "/base" : $2; c = $3; s = $4
  n = ++nval[id, c, s]; val[id, c, s, n] = $5
  if ($9 != 0 || $8 != 0) bad[id, c, s] = 1
  if ($13 + 0 > others_max[id, c, s]) others_max[id, c, s] = $13 + 0
  tx[id] += $7; wal[id] += $10; upd[id] += $11; hot[id] += $12
  nruns++; others_sum += $13; steal_sum += $14
  if ($13 + 0 > others_all) others_all = $13 + 0
  if ($13 + 0 > 10) noisy++
}
END {
  for (key in nval) {   # the median of the rounds
    n = nval[key]
    for (i = 1; i <= n; i++) vs[i] = val[key, i] + 0
    for (i = 2; i <= n; i++) for (j = i; j > 1 && vs[j - 1] > vs[j]; j--) { t = vs[j]; vs[j] = vs[j - 1]; vs[j - 1] = t }
    tps[key] = (n % 2) ? vs[(n + 1) / 2] : (vs[n / 2] + vs[n / 2 + 1]) / 2
  }
  has_base = 0
  for (k = 1; k <= nw; k++) if (wid[k] ~ /\/base$/) for (i = 1; i <= nsyncs; i++) for (j = 1; j <= nclients; j++)
    if (cell(wid[k], clients[j], syncs[i])) has_base = 1
  print "# ratelimit benchmark: latest results"
  print ""
  printf "Run %s with `%s` (%d min %d s in all).\n", date, command, elapsed / 60, elapsed % 60
  print ""
  printf "- Machine: %s.\n", machine
  printf "- Extension: %s.\n", extension
  if (baseline != "") printf "- Baseline build: %s. Its rows are marked \"baseline build\"; each of its runs was made right before or after the same workload of the build above, in the same cell (the order alternates).\n", baseline
  printf "- Load average (1, 5, 15 min) at the start: %s; at the end: %s.\n", load_start, load_end
  if (nruns > 0)
    printf "- CPU used by other processes on the VM during the runs: %.0f%% of the machine on average, %d%% at most (%d of %d runs over 10%%, marked †); hypervisor steal %.0f%%.\n", others_sum / nruns, others_all, noisy, nruns, steal_sum / nruns
  printf "- Server: PostgreSQL defaults except `%s`; synchronous_commit per run%s.\n", settings, (nice != "" ? "; the cluster and pgbench ran at niceness " nice : "")
  if (redis != "") printf "- Redis: %s. Its rows ran in the same cells as the pgbench workloads, right after them; synchronous_commit does not apply to it.\n", redis
  if (halt_poll != "") printf "- Idle vCPUs polled up to %s ns before halting (guest_halt_poll_ns; the VM's default is 0), so a 1-client round trip does not wait for a halted vCPU to wake.\n", halt_poll
  printf "- pgbench `-n -M prepared -T %s -j 2` (one thread for one client), each run after VACUUM and CHECKPOINT; %d round(s)%s.\n", seconds, rounds, (rounds > 1 ? ", the table shows the median" : "")
  print "- Random-key workloads use 100,000 pre-populated keys: they measure updates, not inserts."
  print ""
  print "## Transactions per second"
  print ""
  print "Each cell: transactions/s, and in parentheses the ratio to workload 2 (UPDATE by primary key,"
  print "random key) at the same clients and synchronous_commit. One statement per transaction."
  print ""
  printf "| # | workload |"
  for (i = 1; i <= nsyncs; i++) for (j = 1; j <= nclients; j++) printf " sync %s, %s cl. |", syncs[i], clients[j]
  print ""
  printf "|---|---|"
  for (i = 1; i <= nsyncs * nclients; i++) printf "---:|"
  print ""
  for (k = 1; k <= nw; k++) {
    id = wid[k]
    if (!((id, 1, "on") in tps) && !((id, 8, "on") in tps) && !((id, 32, "off") in tps)) continue
    printf "| %s | %s |", id, wdesc[id]
    for (i = 1; i <= nsyncs; i++) for (j = 1; j <= nclients; j++) {
      c = clients[j]; s = syncs[i]
      if (!cell(id, c, s)) { printf " – |"; continue }
      v = sprintf("%d", tps[id, c, s])
      if (cell("2", c, s) && tps["2", c, s] > 0) v = v sprintf(" (%.2f)", tps[id, c, s] / tps["2", c, s])
      if ((id, c, s) in bad) v = v " ⚠"
      if (others_max[id, c, s] > 10) v = v " †"
      printf " %s |", v
    }
    print ""
  }
  anybad = 0
  for (key in bad) anybad = 1
  if (anybad) { print ""; print "⚠ pgbench reported failed transactions or exited non-zero in this run (see the CSV)." }

  print ""
  print "## Goals"
  print ""
  print "Ratios are of transactions/s, per cell listed as 1 / 8 / 32 clients (or the clients named). \"Needs +x%\" is how much faster"
  print "the worst cell would have to be to meet the goal."
  print ""
  print "| goal | target | measured | result |"
  print "|---|---|---|---|"
  ratio_goal("ratelimit_limit (inline, random keys) vs workload 2", "≥ 0.90×", "5a", "2", "on off", 0.90, "min")
  if (has_base) ratio_goal("the same, baseline build", "≥ 0.90×", "5a/base", "2", "on off", 0.90, "min")
  ratio_goal("ratelimit_limit (inline, random keys) vs PL/pgSQL (random keys), sync off", "≥ 1.50×", "5a", "4a", "off", 1.50, "min")
  if (has_base) ratio_goal("the same, baseline build", "≥ 1.50×", "5a/base", "4a", "off", 1.50, "min")
  ratio_goal("ratelimit_limit (inline, random keys) vs lean SQL upsert bucket (random keys)", "–", "5a", "4c", "on off", 0, "")
  ratio_goal("ratelimit_limit (inline, random keys) vs lean PL/pgSQL bucket (random keys)", "–", "5a", "4e", "on off", 0, "")
  ratio_goal("ratelimit_limit (inline, hot key) vs PL/pgSQL bucket (hot key)", "–", "5b", "4b", "on off", 0, "")
  ratio_goal("ratelimit_limit (inline, hot key) vs lean SQL upsert bucket (hot key)", "–", "5b", "4d", "on off", 0, "")
  ratio_goal("ratelimit_limit (inline, hot key) vs lean PL/pgSQL bucket (hot key)", "–", "5b", "4f", "on off", 0, "")
  ratio_goal("named limit's cost over inline (inline tps / named tps), random keys", "≤ 1.05×", "5a", "5c", "on off", 1.05, "max")
  ratio_goal("refused call's cost vs ratelimit_check (check tps / refused tps), random keys", "≤ 1.00×", "5e", "5f", "on off", 1.00, "max")
  ratio_goal("ratelimit_check vs workload 2, random keys", "≥ 1.00×", "5e", "2", "on off", 1.00, "min")
  # issue 19: memory limits
  ratio_goal("memory grant (6a) vs SELECT 1 (1)", "≥ 0.80×", "6a", "1", "on off", 0.80, "min")
  ratio_goal("memory grant, one hot key (6b) vs 100,000 keys (6a), sync on", "≥ 0.90×", "6b", "6a", "on", 0.90, "min")
  ratio_goal("the same, sync off", "–", "6b", "6a", "off", 0, "")
  ratio_goal("memory grant (6a) vs Redis Lua bucket (r6a), random keys, 8 and 32 clients", "≥ 1.00×", "6a", "r6a", "on off", 1.00, "min", "8 32")
  ratio_goal("the same, 1 client", "–", "6a", "r6a", "on off", 0, "", "1")
  ratio_goal("memory grant, hot key (6b) vs Redis Lua bucket, hot key (r6b)", "–", "6b", "r6b", "on off", 0, "")
  ratio_goal("table grant (5a) vs SELECT 1 (1)", "–", "5a", "1", "on off", 0, "")
  ratio_goal("issue 27: table grant (5a) vs the minimal table's PK UPDATE (2b)", "≥ 0.95×", "5a", "2b", "on off", 0.95, "min")
  ratio_goal("issue 27: table grant (5a) vs the state table's shape (2)", "≥ 0.95×", "5a", "2", "on off", 0.95, "min")
  ratio_goal("issue 27: memory grant (6a) vs SELECT 1 (1), 8 and 32 clients", "≥ 0.80×", "6a", "1", "on off", 0.80, "min", "8 32")
  ratio_goal("issue 27: memory grant (6a) vs Redis Lua bucket (r6a), 8 and 32 clients", "≥ 1.20×", "6a", "r6a", "on off", 1.20, "min", "8 32")
  ratio_goal("issue 27: one hot key (6b) vs 100,000 keys (6a), memory", "≥ 0.90×", "6b", "6a", "on off", 0.90, "min")
  ratio_goal("memory grant (6a) vs table grant (5a)", "–", "6a", "5a", "on off", 0, "")
  # storage: the first line of storage_file (after creating the keys)
  nst = 0
  while ((getline sline < storage_file) > 0) st[++nst] = sline
  if (nst > 0 && split(st[1], sf, ",") < 7) {
    printf "| storage per key after %d keys (pg_total_relation_size / keys) | ≤ 100 B | not measured: %s | – |\n", storage_keys, st[1]
  } else if (nst > 0) {
    per_key = sf[7] + 0
    if (per_key <= 100)
      printf "| storage per key after %d keys (pg_total_relation_size / keys) | ≤ 100 B | %.1f B | **met** (margin %.0f%%) |\n", storage_keys, per_key, (100 / per_key - 1) * 100
    else
      printf "| storage per key after %d keys (pg_total_relation_size / keys) | ≤ 100 B | %.1f B | **missed**: %.1f B (%.1f%%) over |\n", storage_keys, per_key, per_key - 100, (per_key / 100 - 1) * 100
  }

  if (has_base) baseline_section()

  # the server-side cost per call, if measured
  ncost = 0
  while ((getline cline < cost_file) > 0) { split(cline, cf, ","); cost[cf[1]] = cf[2] + 0; ncost++ }
  if (ncost > 0) {
    print ""
    print "## Server-side cost per call"
    print ""
    print "CPU time of one call inside the server, without the round trip and the commit: 100,000 calls (one per"
    print "existing key) in one statement, `SELECT count(*) FROM generate_series(1, 100000) g WHERE <call>`,"
    print "best of five, minus the same statement without the call. Free of the round trip, the commit flush"
    print "and vCPU wake-ups, though not of other CPU load; and not what the goals (throughput) are stated in."
    print ""
    print "| # | call | µs per call |"
    print "|---|---|---:|"
    for (k = 1; k <= nw; k++) if (wid[k] in cost) {
      d = wdesc[wid[k]]
      if (wid[k] == "2") d = "the same UPDATE, in a SQL function `plain_update(key)`"
      if (wid[k] == "2b") d = "the minimal table's UPDATE, in a SQL function `minimal_update(key)`"
      if (wid[k] == "4a") d = "`pl_token_bucket(...)`, random keys"
      if (wid[k] == "4c") d = "`lean_token_bucket(...)`: workload 4c's upsert in a SQL function, random keys"
      if (wid[k] == "4e") d = "`lean_pl_token_bucket(...)`, random keys"
      printf "| %s | %s | %.2f |\n", wid[k], d, cost[wid[k]]
    }
    print ""
    print "| comparison | ratio of costs |"
    print "|---|---:|"
    if (("5a" in cost) && ("2" in cost)) printf "| ratelimit_limit (inline) / plain UPDATE | %.2f |\n", cost["5a"] / cost["2"]
    if (("4a" in cost) && ("5a" in cost)) printf "| PL/pgSQL token bucket / ratelimit_limit (inline) | %.2f |\n", cost["4a"] / cost["5a"]
    if (("4c" in cost) && ("5a" in cost)) printf "| lean SQL token bucket / ratelimit_limit (inline) | %.2f |\n", cost["4c"] / cost["5a"]
    if (("5c" in cost) && ("5a" in cost)) printf "| named / inline | %.2f |\n", cost["5c"] / cost["5a"]
    if (("5f" in cost) && ("5e" in cost)) printf "| refused / ratelimit_check | %.2f |\n", cost["5f"] / cost["5e"]
    if (("5e" in cost) && ("2" in cost)) printf "| ratelimit_check / plain UPDATE | %.2f |\n", cost["5e"] / cost["2"]
    if (("5a" in cost) && ("2b" in cost)) printf "| ratelimit_limit (inline) / the minimal table's UPDATE | %.2f |\n", cost["5a"] / cost["2b"]
    if (("6a" in cost) && ("5a" in cost)) printf "| memory grant / table grant (inline) | %.2f |\n", cost["6a"] / cost["5a"]
    if (("4e" in cost) && ("5a" in cost)) printf "| lean PL/pgSQL token bucket / ratelimit_limit (inline) | %.2f |\n", cost["4e"] / cost["5a"]
    if (("5a/base" in cost) && ("2" in cost)) printf "| baseline build: ratelimit_limit (inline) / plain UPDATE | %.2f |\n", cost["5a/base"] / cost["2"]
    for (k = 1; k <= nw; k++) {
      id = wid[k]
      if (id !~ /\/base$/ || !(id in cost) || cost[id] == 0) continue
      nid = substr(id, 1, length(id) - 5)
      if (nid in cost) printf "| %s %s: this build / baseline build | %.2f |\n", nid, wdesc[nid], cost[nid] / cost[id]
    }
  }

  print ""
  print "## What each workload did"
  print ""
  print "Summed over its runs: WAL bytes and rows updated (in the benchmark tables) per transaction,"
  print "and the share of those updates that were HOT (no index entry written)."
  print ""
  print "| # | workload | transactions | WAL bytes / tx | rows updated / tx | HOT updates |"
  print "|---|---|---:|---:|---:|---:|"
  for (k = 1; k <= nw; k++) {
    id = wid[k]
    if (!(id in tx) || tx[id] == 0) continue
    printf "| %s | %s | %d | %.0f | %.3f | %s |\n", id, wdesc[id], tx[id], wal[id] / tx[id], upd[id] / tx[id],
           (upd[id] > 0 ? sprintf("%.0f%%", 100 * hot[id] / upd[id]) : "–")
  }

  print ""
  print "## Storage"
  print ""
  printf "The state table `ratelimit_state` (heap with its FSM/VM forks, and indexes) after %d distinct keys\n", storage_keys
  print "created by `ratelimit_limit('n', 'k' || lpad(g::text, 6, '0'), cfg)` (token bucket, keys like 'k123456')"
  print "in chunks of 100,000, in a database of its own. Bytes per key = pg_total_relation_size / keys."
  print "The table as installed:"
  print ""
  while ((getline schema_line < schema_file) > 0) printf "- %s\n", schema_line
  print ""
  print "| stage | rows | heap (main fork) | heap + FSM + VM | indexes | total | bytes per key |"
  print "|---|---:|---:|---:|---:|---:|---:|"
  for (i = 1; i <= nst; i++) {
    if (split(st[i], sf, ",") < 7) { printf "| %s | | | | | | |\n", st[i]; continue }
    printf "| %s | %d | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f |\n", sf[1], sf[2], sf[3] / 1e6, sf[4] / 1e6, sf[5] / 1e6, sf[6] / 1e6, sf[7]
  }

  print ""
  print "## Backend memory"
  print ""
  printf "One session making %d calls after a 10,000-call warm-up, each call its own statement and\n", memory_calls
  print "transaction (psql `\\gexec`), cycling through an inline grant (name 'mem': the first 100,000 insert"
  print "a row, the rest update), a named grant, a check and a refusal. Memory contexts: the sum of"
  print "`pg_backend_memory_contexts.total_bytes`; RSS from the backend's `/proc/<pid>/status`."
  print ""
  print "| calls after warm-up | backend pid | memory contexts total | contexts | VmRSS | RssAnon | RssShmem |"
  print "|---|---:|---:|---:|---:|---:|---:|"
  nm = 0
  while ((getline mline < memory_file) > 0) {
    if (mline ~ /^memory measurement failed/) { failed_note = mline; continue }
    if (mline !~ /,/) continue
    split(mline, mf, ","); nm++
    printf "| %s | %s | %d B | %d | %d kB | %d kB | %d kB |\n", (mf[1] == "connected" ? "(just connected)" : mf[1]), mf[2], mf[3], mf[4], mf[5], mf[6], mf[7]
    if (mf[1] == "0") { ctx0 = mf[3]; anon0 = mf[6]; rss0 = mf[5] }
    ctxl = mf[3]; anonl = mf[6]; rssl = mf[5]; last = mf[1]
  }
  if (failed_note != "") { print ""; print "**" failed_note "**" }
  if (nm > 2 && last + 0 > 0) {
    print ""
    printf "Growth from the warm-up to %d calls: memory contexts %+d B (%+.4f B per call), RssAnon %+d kB\n", last, ctxl - ctx0, (ctxl - ctx0) / last, anonl - anon0
    printf "(%+.4f B per call), VmRSS %+d kB. VmRSS includes the shared buffers this backend has touched\n", (anonl - anon0) * 1024 / last, rssl - rss0
    print "(RssShmem), which grows with the data read, not with the number of calls; RssAnon is its private memory."
  }
}
