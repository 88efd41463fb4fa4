// Compiled into every executable that links parity_allocator when that is jemalloc
// (CMakeLists.txt): jemalloc's options, read when it starts (MALLOC_CONF still overrides them).
//
// thp:always: its memory in transparent huge pages where the kernel allows them (its "madvise"
// mode included). Protobuf messages of 1 MiB, tensor buffers, item lists and reports are fresh
// memory at every turn, a page fault per 4 KiB otherwise, and on a VM a fault is a trip to the
// host: a plain gRPC stream of 1 MiB messages ran at 0.28-0.37 GB/s here with 4 KiB pages and
// 1.3-2.2 GB/s with this (tests/bench/e2e_rate.sh), and `parity compare` took 13.0 k faults
// instead of 1.0 k (tests/bench/vs_numpy.sh).
//
// parityd (PARITY_DAEMON_MALLOC_CONF) also keeps freed memory for 5 minutes before handing it
// back to the system (jemalloc's default: 10 s). On a VM with free page reporting memory handed
// back is faulted in from the host again: a pair uploaded a minute after the previous one took
// parityd 39 k page faults (19 k right after it) and `clear_page_erms` was 22 % of its samples;
// with decay off 11.8 k faults and 14 %, and with the read-buffer pool's retention as well
// (server/main.cc) 6.8 %; pairs 2-3 after a minute's pause then cost parityd 1.67-1.87 CPU-s
// instead of 2.08-2.52.
// It also takes all its memory from one arena (jemalloc's default on 2 CPUs: 8): freed memory is
// kept per arena, so each arena kept the peak of the threads it serves and the process the sum
// of those peaks (64 upload streams at once, tests/bench/many_uploads.sh 32: 615-679 MiB with
// one arena against 730-759 with eight; a single upload pair, tests/bench/e2e_rate.sh 2048:
// peak 206-224 MiB against 274-275, no slower).
extern "C" {
#ifdef PARITY_DAEMON_MALLOC_CONF
const char* malloc_conf = "thp:always,metadata_thp:always,dirty_decay_ms:300000,muzzy_decay_ms:300000,narenas:1";
#else
const char* malloc_conf = "thp:always,metadata_thp:always";
#endif
}
