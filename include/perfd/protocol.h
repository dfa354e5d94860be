/* SPDX-License-Identifier: MIT */
/*
 * protocol.h - the perfd socket protocol, version 1.
 *
 * Transport: a Unix stream socket (default PERFD_DEFAULT_SOCKET, overridden
 * by $PERFD_SOCKET for both perfd and perfctl).  The client writes one request
 * as a single JSON object on one line ending in '\n' (at most
 * PERFD_MAX_REQUEST_BYTES including the newline); the daemon answers with one
 * JSON object on one line ending in '\n'.  A connection may carry several
 * requests; answers come in order, each one line (a live snapshot asked
 * for "started" sends one line more ahead of its answer), except that an
 * answer with "encoding": "frame" (a snapshot in a binary format, to a
 * request that said "frame": true) is followed by a frame: exactly
 * "profile_bytes" raw bytes right after its '\n', then the next answer.  A snapshot answers when its duration has
 * passed (or earlier, when the process exits or the client sends "stop").
 *
 * Every request:   {"version": 1, "command": "<name>", ...arguments}
 * Every answer:    {"version": 1, "ok": true, ...result}
 *             or   {"version": 1, "ok": false,
 *                   "error": {"code": "<PERFD_ERR_*>", "message": "<text>"}}
 *
 * Commands
 *  "status"   no arguments.  Result:
 *      daemon_version (string), protocol_version, pid, uptime_seconds,
 *      frequency_hz, cpus, sample_period_ns (the mean period a CPU sample
 *      stands for: samples x it estimates CPU time), sampling ("jittered":
 *      one tick at a random instant of each period, or "fixed": every tick
 *      of a timer at that period, --fixed-period), timer_period_ns (of that
 *      timer: a fraction of sample_period_ns when jittered),
 *      samples: { taken (CPU samples, in periods, idle included), idle,
 *                 ticks_thinned (timer ticks that sampled nothing),
 *                 ticks_clocked (timer ticks timed by a clock read, not
 *                 by the expiry the hrtimer program noted: each CPU's
 *                 first, a missed note, every tick without that program),
 *                 context_switch (samples, idle included, of ticks that
 *                 fell due before a context switch and were charged to
 *                 the task switched out), context_switch_stacked (those
 *                 given the stack the task left its CPU at, which the
 *                 off-CPU program took for them), context_switch_bare
 *                 (those without: rooted at "[context switch]"),
 *                 received (CPU samples the daemon aggregated, in periods),
 *                 profiled (received and still in a profile),
 *                 lost: { ringbuf_full, queue_full (the loop fell behind the
 *                 drain thread's bounded queue), evicted }, lost_total,
 *                 truncated: { kernel_stack, user_stack, stack_limit } },
 *      bpf: { tier (the features the BPF programs were loaded with:
 *             "tables+python+memory", ..., "frame-pointers"; see
 *             daemon/collect/tiers.h), lost: [ { feature ("tables",
 *             "python", "memory", "context-switches"), reason (why: not
 *             supported by this kernel, or the verifier's refusal in its own
 *             words) } ], programs: [ { name, loaded, verified_insns (when
 *             loaded), error (why not: "not needed in this tier", "not asked
 *             for", "not supported by this kernel", "refused by this
 *             kernel's verifier with TIER: \"LINE\"") } ] },
 *      exit_events: { received, lost (exit, exec and fork events) },
 *      processes: { tracked, exited, evicted, expired },
 *      stacks: { interned, frames, modules, aggregation_bytes },
 *      symbols: { modules_loaded, modules_failed, kernel_symbols,
 *                 jit_maps_read (perf maps and jitdumps parsed), jit_maps_refused (not
 *                 read: not a regular file, a symlink, not owned by the
 *                 process's user or root, over 64 MiB or 262,144 lines, or bigger than
 *                 the symbol cache), debug_files_refused (debug-file candidates past
 *                 their size cap or behind a symlink in the binary's directory),
 *                 debug_searches_pending (.gnu_debuglink/MiniDebugInfo searches on
 *                 the symbolizer's thread), tables_refused (symbol, string or line
 *                 tables past 256 MiB, not read),
 *                 memory_bytes, ... },
 *      unwind: { method ("tables" or "frame_pointers"), stacks_with_tables,
 *                stacks_truncated, stacks_pending (truncated in code whose
 *                table was being built: rooted at "[unwind table pending]"),
 *                stacks_unrooted_before_tables (walked by frame pointers
 *                before the process had tables, not to an entry point:
 *                rooted at "[truncated]"),
 *                tables, copy_tables (of code copied from a template: the
 *                perf trampolines of CPython's -X perf, shared by all),
 *                copy_templates_refused (templates whose code did not
 *                decode: their copies are walked with frame pointers),
 *                tables_oversized (CFI past 64 MiB, not read), tables_abandoned
 *                (builds past 10 s of CPU time, given up: no table for that
 *                binary), ... },
 *      memory: { enabled, sample_bytes, events (rss_stat events looked at),
 *                samples, samples_lost, rss_updates, rss_updates_lost },
 *      python: { processes, unsupported (runtimes found), samples (walks),
 *                samples_without_thread_state, samples_truncated, frames,
 *                frames_unmatched, functions, code_objects, code_reads,
 *                code_read_errors, code_reused, cache_resets,
 *                function_table_full, trampoline_arenas (-X perf's
 *                arenas of trampolines found, all processes), memory_bytes },
 *      store: { memory_bytes (everything the store holds), history_bytes,
 *               windows, windows_expired (past the retention),
 *               windows_evicted (for memory, oldest first),
 *               samples_expired, values_evicted: { cpu, memory, offcpu } },
 *      limits: { max_processes, max_stacks, max_frames, max_memory_bytes,
 *                retention_seconds },
 *      drain: { records, batches, dropped, longest_consume_ms (the longest
 *               the drain thread was held by one consume), queued_bytes,
 *               max_queued_bytes },
 *      clients, snapshots, daemon_rss_bytes,
 *      heap: { in_use_bytes, free_bytes (freed, still held by malloc; what
 *              is given back to the kernel is not resident), arena_bytes,
 *              mmapped_bytes, trims, trims_returning_memory,
 *              longest_trim_ms, readings (figures taken since start),
 *              age_ms (how old these are: they are taken, and freed
 *              memory given back, once a second off the event loop) }
 *              (glibc malloc's mallinfo2(), of daemon_rss_bytes: the
 *              store's and the symbol cache's bytes are inside
 *              in_use_bytes),
 *      config: the effective configuration, every option by its name
 *               (daemon/config.c's table: "frequency", "output-dir",
 *               "push-url", "label": { key: value }, ...; durations in
 *               seconds, sizes in bytes, secrets "(set)" or null), and
 *               config_file (the file read, or null),
 *      export: { enabled, interval_seconds, intervals, profiles (encoded),
 *               encode_errors, last_export (Unix seconds or null),
 *               last_encode_ms, longest_encode_ms (one interval, from its
 *               start to its profiles handed to the exporters), steps (loop
 *               turns of the export: models built, encodings taken back and
 *               the batch sent), longest_step_ms, encoding and
 *               encoding_bytes (models waiting for or in their encoding off
 *               the loop), max_encoding_bytes, exporters: [ { name ("files", "pyroscope", "otlp"),
 *               target (the directory, or the URL without credentials),
 *               state ("idle": nothing sent yet, "ok", "retrying": the
 *               profile first in line failed and is retried), queued,
 *               queued_bytes, max_queued_bytes, sent, sent_bytes, dropped
 *               (pushed out of the full queue, oldest first), failed (given
 *               up on: the backend refused it), retries, last_success,
 *               last_error_time (Unix seconds or null), last_error (text or
 *               null) } ] },
 *      metrics: { enabled (--metrics-address), scrapes (/metrics answered),
 *               errors (other requests answered with an error, or timed
 *               out), closed_for_room (connections closed for a newer
 *               one) }
 *  "ps"       optional "interval": seconds, integer 1..PERFD_PS_MAX_INTERVAL
 *             (default PERFD_PS_DEFAULT_INTERVAL); "all": true lists every
 *             live process perfd knows.  Result:
 *      interval_seconds (the window actually covered: min(interval, uptime)),
 *      processes: [ { pid, ns_pid, start_time_ns, comm, cgroup, unit
 *                     (as top's), samples, cpu_percent, wait_percent
 *                     (off-CPU time over the interval, threads adding up),
 *                     waits ({ CLASS: percent }, the most first),
 *                     rss_bytes, peak_rss_bytes, rss_anon_bytes,
 *                     rss_file_bytes, rss_shmem_bytes, exited, total_samples,
 *                     runtime (string, present when a language runtime was
 *                     found: "CPython 3.11.7", "CPython 3.7.16
 *                     (unsupported)") } ]
 *      and rss_growth_bytes_per_second (the least-squares slope of the RSS
 *      timeline over the interval), growing (a steady rise: see
 *      daemon/profile/rss.h), holding the processes with at least one
 *      sample in the window or whose RSS changed in it, most samples first.
 *      cpu_percent = samples / (frequency * interval) * 100.
 *  "snapshot" which processes, at least one of: "pid" (an integer, or an
 *             array of 1..PERFD_SNAPSHOT_MAX_PIDS), "comm" (exact, as the
 *             kernel truncates it), "cgroup" (a cgroup v2 path: it and the
 *             cgroups below it), "unit" (a systemd unit: a path element of
 *             the process's cgroup), "all": true, "tree" (a pid: it and
 *             its descendants; perfctl record's: a live snapshot follows
 *             the pid's forks and execs from its start, in the kernel, so
 *             each descendant is taken at its fork; from history, by the
 *             parent each had when perfd first saw it); of those, only the
 *             ones the client may see.
 *             When, exactly one of: "duration": seconds from now on, number
 *             0 < d <= PERFD_SNAPSHOT_MAX_SECONDS (the answer comes when it
 *             has passed, or when the one process asked for by pid exits);
 *             "since": the last seconds, answered at once from the store;
 *             "from" (and optionally "to", default now): seconds since the
 *             epoch, answered at once from the store.  The store keeps 1 s
 *             windows for the last 2 minutes, 10 s ones for 30 minutes and
 *             60 s ones beyond, over the daemon's --retention; a range
 *             takes the windows at least half inside it (the second
 *             in progress by the part of it that has passed, so "since"
 *             has the newest samples).
 *             "kind": "cpu" (default; samples), "memory" (bytes), "offcpu"
 *             (nanoseconds).  "format": a name of include/perfd/formats.h
 *             ("folded" default, "json", "pprof", "speedscope", "html", "svg").
 *             "lines":
 *             boolean (default false: true gives
 *             user frames as "function (file:line)" and inlined functions as
 *             frames of their own, where debug info allows), "python_lines":
 *             boolean (default true: Python frames as "qualname
 *             (file:line)"; false: "qualname (file)", lines merged),
 *             "threads": boolean (default false: true roots each stack,
 *             after comm, at a frame "[thread TID COMM]").  "started":
 *             boolean (default false; a live snapshot only): true makes
 *             perfd send the line {"version": 1, "ok": true, "started":
 *             true} ahead of the answer, as soon as the snapshot takes
 *             every sample of its selection (perfctl record runs its
 *             command only then); a refusal is the answer, with no such
 *             line.  "frame": boolean (default false; a binary format
 *             only): true has the profile's bytes follow the answer's line
 *             as a frame, raw; without it they are the line's "profile"
 *             string, in base64 (4/3 the bytes, and the whole answer read
 *             before a byte of it: as before frames existed, so a client
 *             that does not know them keeps working).  Answer:
 *      pid, comm, start_time_ns, ns_pid (when one pid was asked for and
 *      found), processes: [ { pid, comm, start_time_ns, ns_pid, cgroup,
 *      unit, exited, value } ], from, to (Unix seconds: the span the data
 *      covers), duration_seconds, kind, unit ("samples", "bytes",
 *      "nanoseconds"), samples, value (total), period_ns (the mean period
 *      a CPU sample stands for), sampling ("jittered" or "fixed", as in
 *      status), exited (bool: the one process exited during a live
 *      snapshot), stopped (bool, a live snapshot only: ended early by the
 *      client's "stop"), note (string, present when something the user should
 *      know happened), format, and then profile, or for a binary format
 *      encoding: "frame" and profile_bytes (the frame's size, the bytes
 *      that follow the line), or "base64" and profile (the bytes in
 *      base64) when "frame" was not asked for.
 *      Folded: profile is a string, one line per stack,
 *      "comm;root;...;leaf COUNT\n", kernel frames with the suffix "_[k]".
 *      Json: profile is an object, the call tree (daemon/encode/json.c):
 *      { kind, unit, period_ns, total, frames: [ { kind ("kernel",
 *      "native", "python", "jit", "special"), function, file, line,
 *      start_line (the function's first line, when known: native with
 *      "lines", Python always), module ("[kernel.kallsyms]" for the
 *      kernel), build_id, offset (a kernel frame's absolute address only
 *      for a client the kernel shows kernel addresses: README), symbol_offset
 *      (kernel frames: from the function's start), inlined_by } ],
 *      processes: [ { pid, ns_pid,
 *      comm, start_time_ns, cgroup, unit, exited, total, tree: { self,
 *      total, children: [ { frame | thread, self, total, children } ] } } ] }
 *      Pprof: binary, the gzipped profile.proto message
 *      (proto/profile.proto, daemon/encode/pprof.c) in the frame after the
 *      line: the bytes are a .pb.gz file as go tool pprof reads it.
 *      Speedscope: profile is an object, speedscope's file format
 *      (daemon/encode/speedscope.c): { $schema, exporter, name,
 *      activeProfileIndex, shared: { frames: [ { name, file, line } ] },
 *      profiles: [ { type: "sampled", name, unit ("nanoseconds", "bytes"),
 *      startValue, endValue, samples: [ [ frame index, root first ] ],
 *      weights } ] }, one profile per process (per thread with "threads").
 *      Html: profile is a string, a self-contained HTML page (an
 *      interactive flame graph, daemon/encode/html.c) to write to a file.
 *      Svg: profile is a string, a static SVG document (the same flame
 *      graph, daemon/encode/svg.c) to write to a file.
 *  "stop"     no arguments.  Sent on the connection of a live snapshot while
 *      it waits, it ends the snapshot now: the snapshot answers as at its
 *      end, over the span it covered, with "stopped": true; the
 *      stop has no answer of its own.  Sent when nothing waits (the
 *      snapshot answered meanwhile), it answers { stopped: false }.
 *
 * Who sees what: every local user may connect (the socket is mode 0666, its
 * directory 0755); what an answer holds depends on the connecting process's
 * credentials, which the kernel recorded at connect() (SO_PEERCRED,
 * SO_PEERGROUPS; daemon/api/auth.h).  Root, and a process whose primary or
 * supplementary groups include "perfd" (looked up at each connection), see
 * every process.  Any other user sees only the processes whose real,
 * effective and saved uids all equal its uid; a setuid process, whose uids
 * differ, is seen only by the privileged.  What a client may not see is
 * absent, never an error: it is not in "ps", not in a snapshot's selection
 * (live or from history), and a "snapshot" of its pid answers exactly as
 * for a pid without a process (no_such_process, same message).  "status"
 * answers everyone: it holds counters, no process.
 *
 *  "mem"      "pid" (required), "since": seconds (default 600), "top": 1..100
 *             sites (default 10).  The process's memory from the store:
 *      pid, comm, start_time_ns, exited, from, to,
 *      rss: { bytes, anon_bytes, file_bytes, shmem_bytes, time },
 *      peak: { bytes, time, sampled_peak_bytes, kernel_hiwater_bytes,
 *              source ("samples" or "kernel high-water mark") },
 *      growth: { bytes_per_second, growing, r2, rise_bytes, points },
 *      timeline: [ { time, seconds, bytes, anon_bytes, file_bytes,
 *                    shmem_bytes, max_bytes } ] (one per store window),
 *      sample_bytes (mean growth a memory sample stands for),
 *      attributed_bytes (sampled growth in the range),
 *      sites: [ { function, kind, file, line, self_bytes, total_bytes } ]
 *             (where each sample's stack enters the process's code: the
 *             innermost Python frame, else the innermost native one),
 *      peak_attribution: { trough_time, trough_bytes, peak_time, peak_bytes,
 *             sampled_bytes, explained_bytes, unexplained_bytes, sites }
 *             or null without readings.
 *
 *  "top"      one refresh of the live view (perfctl top), computed from the
 *             store's live aggregates over the last "interval" whole seconds
 *             (1..PERFD_TOP_MAX_INTERVAL, default PERFD_TOP_DEFAULT_INTERVAL),
 *             holding only the rows asked for: "rows" (1..PERFD_TOP_MAX_ROWS,
 *             default PERFD_TOP_DEFAULT_ROWS) from "offset" (0..
 *             PERFD_TOP_MAX_OFFSET) of the sorted list.  "view":
 *             "processes" (default) or "functions".  Both views take
 *             "filter" (a substring of the comm, any case, 1..15 bytes),
 *             "kernel_threads" (default false: left out) and, of the
 *             processes, only those the client may see.
 *             Processes: "sort": "cpu" (default), "rss", "peak", "growth";
 *             "all": true takes every live process, not only the active
 *             ones (those ps lists: on CPU, or their RSS moved).
 *             Functions: of "pid", or of every process the process view
 *             would take; "kind": "cpu" (default), "memory" (growth,
 *             bytes; kernel frames left out) or "offcpu" (nanoseconds
 *             waited, each stack's leaf why: "[wait: sleep]" ...);
 *             "sort": "self" (default) or
 *             "total"; "function" (its name) with optional
 *             "function_kind" ("native", "kernel", "python", ...): its
 *             callers and callees, "depth" levels (1..PERFD_TOP_MAX_DEPTH,
 *             default PERFD_TOP_DEFAULT_DEPTH), at most "rows" nodes each.
 *             A frame counts as the function its symbol names (inlined code
 *             is its caller's); functions are rows by (name, kind).  Answer:
 *      view, time (Unix seconds: when the window was taken),
 *      window_start, window_end (Unix seconds: the whole seconds counted),
 *      interval_seconds (covered),
 *      host: { cpus, frequency_hz, samples_per_second (CPU samples
 *              profiled), samples_lost (in the last interval),
 *              samples_lost_total, daemon_cpu_percent (of one CPU, all its
 *              threads), rate_seconds (what the rates cover),
 *              daemon_rss_bytes } (the rates are absent in the daemon's
 *              first second), sort, matched (rows before rows and offset),
 *              offset, and
 *      processes: growth_seconds (the window of the growth rates: the
 *              interval, at least PERFD_TOP_GROWTH_SECONDS),
 *              processes: [ { pid, ns_pid, start_time_ns, comm, uid
 *              (absent when its uids differ), cgroup, unit, runtime,
 *              kernel_thread, exited, samples, cpu_percent (of one CPU),
 *              rss_bytes, peak_rss_bytes, rss_growth_bytes_per_second,
 *              growing, top_function, top_function_kind, top_function_file
 *              (Python), top_function_percent (of its samples) } ]
 *      functions: pid, comm, exited (with "pid"), kind, unit,
 *              kernel_frames, total, processes_sampled,
 *              functions: [ FROW + { self, total, self_percent,
 *              total_percent } ] (left out when "function" was sampled:
 *              the answer is its callers and callees), and with
 *              "function": function: FROW +
 *              { self, total, self_percent, total_percent, depth,
 *              callers: [ NODE ], callees: [ NODE ] } (null when it was not
 *              sampled); NODE = FROW + { value, percent (of the function's
 *              total), callers | callees: [ NODE ] (the next level) }, or
 *              { root: true, value, percent } for a caller: the function
 *              (or the caller above) was the outermost frame.
 *              FROW = { function, kind, file, line (the lowest sampled, else
 *              where it starts), module (its binary's file name) }, file,
 *              line and module where known.
 *             "pid" of a process the client may not see, or that perfd does
 *             not know, answers no_such_process.
 *
 * perfctl's own documents (no daemon command: perfctl computes them)
 *  `perfctl --json report` (cli/report.c) prints
 *      { version, ok: true, source ("perfd" or "file"), file (with a file),
 *        format ("folded", "json", "pprof": what was read), kind, unit,
 *        period_ns (CPU with a known period), total, total_ns (likewise),
 *        kernel_frames (false for memory: left out), lines, sort,
 *        rows (how many functions, or function lines, in all),
 *        functions: [ ROW + { self, self_ns, self_percent, total, total_ns,
 *                     total_percent } ] (the top rows in the sort's order),
 *        callers: { function, total, total_ns, total_percent,
 *                   callers: [ ROW + { value, value_ns, percent } ] }
 *                 (with --callers; percent of the function's total),
 *        callees: { function, total, ..., self, self_ns, self_percent,
 *                   callees: [ ROW + { value, value_ns, percent } ] } }
 *      ROW = { function, kernel (bool), file, line } (file and line where
 *      known), or { root: true } for a caller: the function was the
 *      outermost frame.  Percentages have two decimals; *_ns fields are
 *      present when the value is CPU samples with a known period.
 *      Errors as every command's; perfctl's codes: "bad_profile" (a file
 *      that cannot be read as a profile), "no_such_function" (--callers or
 *      --callees of a name the profile lacks).
 *  `perfctl --json diff BEFORE AFTER` (cli/diff.c) prints
 *      { version, ok: true, kind, unit (both files'),
 *        before: { file, format, total, total_ns, period_ns },
 *        after: { the same of AFTER },
 *        kernel_frames (false for memory: left out), sort: "change",
 *        rows (how many functions in all),
 *        functions: [ { function, kernel (bool),
 *                       before: { self, self_ns, self_percent, total, total_ns,
 *                                 total_percent },
 *                       after: { the same },
 *                       self_delta, total_delta (after's percent - before's,
 *                                 in points),
 *                       change (the larger of |self_delta|, |total_delta|) } ]
 *                   (the top rows, the largest change first) }
 *      A function in one file only has zeros on the other side.  Percentages
 *      and points have two decimals; *_ns as for report, per side (a folded
 *      file has no period).  Errors as report's, and "kind_mismatch" (BEFORE
 *      and AFTER hold different kinds).  With --format html|svg -o FILE it
 *      writes the differential flame graph (cli/diff_flame.c) to FILE and
 *      prints { ok: true, output: FILE }, as `snapshot -o FILE` does; a
 *      graph on stdout with --json is a usage error.
 *
 *  `perfctl --json diagnose` (cli/diagnose.c) prints
 *      { version, ok: true,
 *        workload: { pid, comm, cmdline (while the same process lives),
 *                    exited, processes (how many the selection holds) },
 *        from, to, seconds (the window: the range cut to the process's
 *        life), period_ns, frequency_hz,
 *        cpu: { samples, possible_samples (window x frequency),
 *               cpu_percent (of one CPU), waiting (below
 *               waiting_below_percent), enough_samples (at least
 *               min_samples), and with enough samples
 *               dominant_self: ROW + { self, self_percent, total,
 *                              total_percent } (line: its line with the
 *                              most self),
 *               dominant_total: the same + { role ("coordinator": self
 *                              under 10 % of its total; else "worker"),
 *                              self_share_percent, callees: [ { function,
 *                              kernel, value, percent (of its total) } ],
 *                              path: [ the pass-through callers above it ] } },
 *        memory: { sampled_bytes, growth_sampled, enough_growth (at
 *                  least min_memory_samples samples of sample_bytes),
 *                  min_memory_samples, and for one process sample_bytes,
 *                  rss_bytes, peak_rss_bytes, peak_time, growing,
 *                  growth_bytes_per_second (mem's), top_site: { function,
 *                  file, line, bytes (the memory profile's total of it),
 *                  percent (of sampled_bytes) } when enough growth was
 *                  sampled },
 *        waiting: { offcpu_ns, percent (of the CPU and off-CPU time),
 *                   runqueue_percent ([wait: cpu]'s), oversubscribed (at
 *                   least oversubscribed_from_percent), top_class ("[wait:
 *                   network]") and top_class_percent (of offcpu_ns),
 *                   call and code: { function, file, line, percent (of
 *                   top_class's) }: the call it blocked in and the code
 *                   that made it (see analysis/diagnose.h) },
 *        gil (when a Python thread waits for its GIL at least from_percent
 *             of its time): { from_percent, waiter: { tid, comm, percent
 *             (of its time waiting for it) }, holder: { tid, comm, percent
 *             (of its time holding it), code: { function, file, line,
 *             percent (of its holding) } } (the other thread that held it
 *             the longest) } }
 *
 * Error codes are stable strings, listed below; messages are for people.
 */
#ifndef PERFD_PROTOCOL_H
#define PERFD_PROTOCOL_H

#define PERFD_PROTOCOL_VERSION 1
#define PERFD_DEFAULT_SOCKET "/run/perfd/perfd.sock"
#define PERFD_SOCKET_ENV "PERFD_SOCKET"

#define PERFD_MAX_REQUEST_BYTES (64 * 1024)
#define PERFD_PS_DEFAULT_INTERVAL 10
#define PERFD_PS_MAX_INTERVAL 60
#define PERFD_SNAPSHOT_MAX_SECONDS 3600
#define PERFD_SNAPSHOT_MAX_PIDS 64
#define PERFD_MAX_RETENTION_SECONDS (7 * 24 * 3600)
#define PERFD_TOP_DEFAULT_INTERVAL 2
#define PERFD_TOP_MAX_INTERVAL 60
#define PERFD_TOP_GROWTH_SECONDS 10 /* the least window of top's growth rates */
#define PERFD_TOP_DEFAULT_ROWS 50
#define PERFD_TOP_MAX_ROWS 1000
#define PERFD_TOP_MAX_OFFSET 100000
#define PERFD_TOP_DEFAULT_DEPTH 1
#define PERFD_TOP_MAX_DEPTH 8
#define PERFD_TOP_FILTER_BYTES 16          /* a comm's length, NUL included */
#define PERFD_TOP_MAX_FUNCTION_BYTES 1024  /* NUL included */

#define PERFD_ERR_BAD_REQUEST "bad_request"         /* not JSON, wrong field types or values */
#define PERFD_ERR_TOO_LARGE "request_too_large"     /* line longer than PERFD_MAX_REQUEST_BYTES */
#define PERFD_ERR_VERSION "unsupported_version"
#define PERFD_ERR_UNKNOWN_COMMAND "unknown_command"
#define PERFD_ERR_NO_SUCH_PROCESS "no_such_process"
#define PERFD_ERR_BUSY "busy"                       /* too many snapshots or clients, in all or of one uid */
#define PERFD_ERR_TIMEOUT "timeout"                 /* no request for the idle timeout: the connection closes */
#define PERFD_ERR_INTERNAL "internal"

#endif
