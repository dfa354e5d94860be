/* SPDX-License-Identifier: MIT */
/*
 * test-exporter.c - exporter_configure (daemon/export/exporter.c) is all
 * or nothing: when a sink being turned on cannot get its worker thread,
 * the sinks already running keep their targets, as a SIGHUP that fails
 * must keep the running configuration whole.  Thread creation is made to
 * fail by a default thread stack no mmap can give.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "export/exporter.h"

static struct exporter_stats stats_of(struct exporter *x)
{
	struct exporter_stats st;

	exporter_get_stats(x, &st);
	return st;
}

Test(exporter, a_sink_that_cannot_start_changes_nothing)
{
	char dir_a[] = "/tmp/perfd-test-exporter-a-XXXXXX", dir_b[] = "/tmp/perfd-test-exporter-b-XXXXXX";
	struct export_opts o = { .interval_s = 60, .queue_max_bytes = 1 << 20 };
	struct export_source src = { 0 };
	struct exporter *x = NULL;
	sd_event *e = NULL;
	pthread_attr_t huge;
	struct exporter_stats st;

	cr_assert_not_null(mkdtemp(dir_a));
	cr_assert_not_null(mkdtemp(dir_b));
	cr_assert_geq(sd_event_new(&e), 0);
	cr_assert_eq(exporter_new(e, &src, &x), 0);
	o.output_dir = dir_a;
	cr_assert_eq(exporter_configure(x, &o), 0);
	st = stats_of(x);
	cr_assert_eq(st.n_sinks, 1);
	cr_assert_str_eq(st.sinks[0].target, dir_a);

	/* files to dir_b and Pyroscope on, whose thread cannot start */
	cr_assert_eq(pthread_attr_init(&huge), 0);
	cr_assert_eq(pthread_attr_setstacksize(&huge, (size_t)1 << 46), 0);
	cr_assert_eq(pthread_setattr_default_np(&huge), 0);
	o.output_dir = dir_b;
	o.push.url = "http://127.0.0.1:9/";
	o.push.timeout_s = 1;
	cr_assert_lt(exporter_configure(x, &o), 0, "a thread started with a 64 TiB stack");
	st = stats_of(x);
	cr_assert_eq(st.n_sinks, 1, "%zu sinks after a failed configure", st.n_sinks);
	cr_assert_str_eq(st.sinks[0].target, dir_a, "the files sink moved to %s", st.sinks[0].target);

	/* and once threads can start, the same configuration takes */
	cr_assert_eq(pthread_attr_setstacksize(&huge, (size_t)1 << 20), 0);
	cr_assert_eq(pthread_setattr_default_np(&huge), 0);
	cr_assert_eq(exporter_configure(x, &o), 0);
	st = stats_of(x);
	cr_assert_eq(st.n_sinks, 2);
	cr_assert_str_eq(st.sinks[0].target, dir_b);
	pthread_attr_destroy(&huge);
	exporter_free(x);
	sd_event_unref(e);
	cr_assert_eq(rmdir(dir_a), 0);
	cr_assert_eq(rmdir(dir_b), 0);
}
