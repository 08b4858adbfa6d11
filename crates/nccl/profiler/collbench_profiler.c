/*
 * collbench's NCCL profiler plugin: records which algorithm, protocol and
 * channel count NCCL chose for each collective (and the channel count of
 * each send/recv), so `collbench run --explain` can print what NCCL itself
 * reported instead of guessing from a cost model.
 *
 * NCCL loads this library through NCCL_PROFILER_PLUGIN and looks up the
 * newest `ncclProfiler_vN` symbol it knows. collbench opens the same file
 * (the dynamic loader hands both the same instance) and calls the
 * `collbench_profiler_*` functions below to switch recording on around a
 * separate, untimed pass and to drain what was recorded.
 *
 * How recording is switched: NCCL passes `init` a pointer to its activation
 * mask (one process-wide int in NCCL 2.24 to 2.28) and reads that int again,
 * atomically, each time a collective or send/recv is enqueued. So storing
 * ncclProfileColl|ncclProfileP2p there turns events on for operations
 * enqueued from then on, and storing 0 turns them off; the timed loop runs
 * with 0, where NCCL makes no calls into this library at all.
 *
 * Only collective and point-to-point events are recorded; every other
 * event type gets a NULL handle, which tells NCCL to make no further calls
 * for it. Memory is bounded: a fixed ring of records, with a count of the
 * events dropped when it is full. Every function returns success, except
 * `init` when NCCL passes no activation mask (the plugin could then never
 * be switched on, so NCCL had better disable it).
 *
 * The descriptor layouts below restate the ABI of NCCL's ext-profiler
 * headers (profiler_v2.h .. profiler_v5.h, NCCL 2.28.3), limited to the
 * members read here; the _Static_asserts pin the byte offsets NCCL uses on
 * LP64 Linux.
 */

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define EXPORT __attribute__((visibility("default")))

/* ncclResult_t values used here. */
enum { NCCL_OK = 0, NCCL_INVALID_ARGUMENT = 4 };

/* Event type bits (ncclProfileColl, ncclProfileP2p). */
enum { PROFILE_COLL = 1 << 1, PROFILE_P2P = 1 << 2 };

/* ------------------------------------------------------------------ */
/* What collbench reads back: one record per collective or p2p event. */
/* Mirrored by `RawEvent` in crates/nccl/src/explain/events.rs.       */
/* ------------------------------------------------------------------ */

#define CB_NAME_LEN 32

enum { CB_KIND_COLL = 1, CB_KIND_P2P = 2 };

struct collbench_event {
  uint64_t comm_hash;      /* communicator id; 0 where NCCL gives none */
  uint64_t seq_number;     /* collective sequence number; 0 for p2p */
  uint64_t count;          /* elements */
  int32_t kind;            /* CB_KIND_COLL or CB_KIND_P2P */
  int32_t rank;            /* rank in the communicator */
  int32_t nranks;          /* ranks in the communicator; -1 unknown */
  int32_t peer;            /* p2p peer; -1 for collectives */
  int32_t root;            /* collective root; -1 for p2p */
  int32_t n_channels;      /* channels NCCL used (max channels before v4); -1 unknown */
  int32_t n_warps;         /* warps per block; -1 unknown */
  int32_t interface_version; /* ncclProfiler_vN that NCCL called */
  char func[CB_NAME_LEN];  /* "AllReduce", "Send", ... */
  char algo[CB_NAME_LEN];  /* "RING", "TREE", "NVLS", ...; "" for p2p */
  char proto[CB_NAME_LEN]; /* "LL", "LL128", "SIMPLE"; "" for p2p */
  char datatype[CB_NAME_LEN]; /* "ncclFloat32", ... */
};

/* ------------------------------------------------------------------ */
/* NCCL's descriptors, versions 2 to 5 (collective and p2p members).  */
/* ------------------------------------------------------------------ */

struct coll_v5 {
  uint64_t seq_number;
  const char *func;
  const void *send_buff;
  void *recv_buff;
  size_t count;
  int root;
  const char *datatype;
  uint8_t n_channels;
  uint8_t n_warps;
  const char *algo;
  const char *proto;
  void *parent_group;
};
struct p2p_v5 {
  const char *func;
  void *buff;
  const char *datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
  void *parent_group;
};
struct descr_v5 {
  uint64_t type;
  void *parent_obj;
  int rank;
  union {
    struct coll_v5 coll;
    struct p2p_v5 p2p;
  } u;
};

/* v4: the type is one byte and nothing follows `proto` / `n_channels`. */
struct coll_v4 {
  uint64_t seq_number;
  const char *func;
  const void *send_buff;
  void *recv_buff;
  size_t count;
  int root;
  const char *datatype;
  uint8_t n_channels;
  uint8_t n_warps;
  const char *algo;
  const char *proto;
};
struct p2p_v4 {
  const char *func;
  void *buff;
  const char *datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
};
struct descr_v4 {
  uint8_t type;
  void *parent_obj;
  int rank;
  union {
    struct coll_v4 coll;
    struct p2p_v4 p2p;
  } u;
};

/* v3: name and communicator hash lead; p2p has no channel count. */
struct coll_v3 {
  const char *name;
  uint64_t comm_hash;
  uint64_t seq_number;
  const char *func;
  const void *send_buff;
  void *recv_buff;
  size_t count;
  int root;
  const char *datatype;
  uint8_t n_max_channels;
  uint8_t n_warps;
  const char *algo;
  const char *proto;
};
struct p2p_v3 {
  const char *name;
  uint64_t comm_hash;
  const char *func;
  void *buff;
  const char *datatype;
  size_t count;
  int peer;
};
struct descr_v3 {
  uint8_t type;
  void *parent_obj;
  int rank;
  union {
    struct coll_v3 coll;
    struct p2p_v3 p2p;
  } u;
};

/* v2: as v3 with the traffic size before the channel count. */
struct coll_v2 {
  const char *name;
  uint64_t comm_hash;
  uint64_t seq_number;
  const char *func;
  const void *send_buff;
  void *recv_buff;
  size_t count;
  int root;
  const char *datatype;
  size_t traffic_bytes;
  uint8_t n_max_channels;
  uint8_t n_warps;
  const char *algo;
  const char *proto;
};
struct descr_v2 {
  uint8_t type;
  void *parent_obj;
  int rank;
  union {
    struct coll_v2 coll;
    struct p2p_v3 p2p; /* same layout in v2 and v3 */
  } u;
};

/* Offsets of the ABI, LP64: the union starts at byte 24. */
_Static_assert(offsetof(struct descr_v5, rank) == 16, "v5 rank");
_Static_assert(offsetof(struct descr_v5, u) == 24, "v5 union");
_Static_assert(offsetof(struct coll_v5, count) == 32, "v5 coll.count");
_Static_assert(offsetof(struct coll_v5, n_channels) == 56, "v5 coll.nChannels");
_Static_assert(offsetof(struct coll_v5, algo) == 64, "v5 coll.algo");
_Static_assert(offsetof(struct coll_v5, proto) == 72, "v5 coll.proto");
_Static_assert(offsetof(struct p2p_v5, peer) == 32, "v5 p2p.peer");
_Static_assert(offsetof(struct p2p_v5, n_channels) == 36, "v5 p2p.nChannels");
_Static_assert(offsetof(struct descr_v4, u) == 24, "v4 union");
_Static_assert(offsetof(struct coll_v3, algo) == 80, "v3 coll.algo");
_Static_assert(offsetof(struct coll_v2, algo) == 88, "v2 coll.algo");
_Static_assert(offsetof(struct p2p_v3, peer) == 48, "v3 p2p.peer");

typedef void (*log_fn_t)(int level, unsigned long flags, const char *file, int line,
                         const char *fmt, ...);

/* ------------------------------------------------------------------ */
/* State: the ring, the masks NCCL handed us, the wanted mask.         */
/* ------------------------------------------------------------------ */

#define RING_CAPACITY 8192
#define MAX_MASKS 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct collbench_event ring[RING_CAPACITY];
static size_t ring_head;  /* index of the oldest record */
static size_t ring_len;   /* records held */
static uint64_t dropped;  /* events lost to a full ring since the last drain */
static int *masks[MAX_MASKS];
static int n_masks;
static int wanted_mask;   /* what every mask is set to */
static int inits;         /* init calls so far */
static int interface_version; /* the ncclProfiler_vN NCCL called last */

/* Per-communicator context (v4, v5 tell us these at init). */
struct comm_ctx {
  uint64_t comm_hash;
  int nranks;
  int rank;
};

/* Contexts are static slots, not heap memory, so that a finalize racing a
 * late event can never free what the event reads. */
#define MAX_COMMS 256
static struct comm_ctx comms[MAX_COMMS];
static int n_comms;
static struct comm_ctx unknown_comm = {0, -1, -1};

static void copy_name(char *dst, const char *src) {
  if (src == NULL) {
    dst[0] = '\0';
    return;
  }
  strncpy(dst, src, CB_NAME_LEN - 1);
  dst[CB_NAME_LEN - 1] = '\0';
}

static void push(const struct collbench_event *e) {
  pthread_mutex_lock(&lock);
  if (ring_len == RING_CAPACITY) {
    dropped++;
  } else {
    ring[(ring_head + ring_len) % RING_CAPACITY] = *e;
    ring_len++;
  }
  pthread_mutex_unlock(&lock);
}

/* Remembers NCCL's mask pointer and sets it to the wanted mask: NCCL calls
 * init for every new communicator, and the int it points to is shared. */
static int common_init(void **context, int *mask, uint64_t comm_hash, int nranks, int rank,
                       int version) {
  if (context == NULL || mask == NULL) return NCCL_INVALID_ARGUMENT;
  pthread_mutex_lock(&lock);
  int known = 0;
  for (int i = 0; i < n_masks; i++) known |= masks[i] == mask;
  if (!known && n_masks < MAX_MASKS) masks[n_masks++] = mask;
  __atomic_store_n(mask, wanted_mask, __ATOMIC_RELAXED);
  struct comm_ctx *ctx = &unknown_comm;
  if (n_comms < MAX_COMMS) {
    ctx = &comms[n_comms++];
    ctx->comm_hash = comm_hash;
    ctx->nranks = nranks;
    ctx->rank = rank;
  }
  inits++;
  interface_version = version;
  pthread_mutex_unlock(&lock);
  *context = ctx;
  return NCCL_OK;
}

static void base_event(struct collbench_event *e, void *context, int rank, int version) {
  const struct comm_ctx *ctx = context ? (const struct comm_ctx *)context : &unknown_comm;
  memset(e, 0, sizeof(*e));
  e->comm_hash = ctx->comm_hash;
  e->nranks = ctx->nranks;
  e->rank = rank;
  e->peer = -1;
  e->root = -1;
  e->n_channels = -1;
  e->n_warps = -1;
  e->interface_version = version;
}

/* Fills `e` from a collective descriptor of any version: the members
 * read keep their names from v2 to v5 but for the channel count. */
#define FILL_COLL(e, c, channels)               \
  do {                                          \
    (e)->kind = CB_KIND_COLL;                   \
    (e)->seq_number = (c)->seq_number;          \
    (e)->count = (c)->count;                    \
    (e)->root = (c)->root;                      \
    (e)->n_channels = (c)->channels;            \
    (e)->n_warps = (c)->n_warps;                \
    copy_name((e)->func, (c)->func);            \
    copy_name((e)->algo, (c)->algo);            \
    copy_name((e)->proto, (c)->proto);          \
    copy_name((e)->datatype, (c)->datatype);    \
  } while (0)

/* v4, v5: channels used; the communicator came with init. */
#define COLL_V45(e, c) FILL_COLL(e, c, n_channels)

/* v2, v3: the most channels NCCL may use; the descriptor names the
 * communicator. */
#define COLL_V23(e, c)                          \
  do {                                          \
    FILL_COLL(e, c, n_max_channels);            \
    (e)->comm_hash = (c)->comm_hash;            \
  } while (0)

/* v4, v5 send/recv (v2, v3: p2p_v3_event below). */
#define P2P_V45(e, p)                           \
  do {                                          \
    (e)->kind = CB_KIND_P2P;                    \
    (e)->count = (p)->count;                    \
    (e)->peer = (p)->peer;                      \
    (e)->n_channels = (p)->n_channels;          \
    copy_name((e)->func, (p)->func);            \
    copy_name((e)->datatype, (p)->datatype);    \
  } while (0)

/* start_event of ncclProfiler_v<version>: records collectives and
 * send/recv; every other event gets a NULL handle. */
#define START_EVENT(version, fill_coll, fill_p2p)                                 \
  static int start_v##version(void *context, void **handle,                      \
                              struct descr_v##version *d) {                      \
    if (handle) *handle = NULL;                                                  \
    if (d == NULL || (d->type != PROFILE_COLL && d->type != PROFILE_P2P))        \
      return NCCL_OK;                                                            \
    struct collbench_event e;                                                    \
    base_event(&e, context, d->rank, version);                                   \
    if (d->type == PROFILE_COLL)                                                 \
      fill_coll(&e, &d->u.coll);                                                 \
    else                                                                         \
      fill_p2p(&e, &d->u.p2p);                                                   \
    push(&e);                                                                    \
    return NCCL_OK;                                                              \
  }

/* ------------------------------------------------------------------ */
/* Version 5 (NCCL 2.28)                                               */
/* ------------------------------------------------------------------ */

static int init_v5(void **context, uint64_t comm_id, int *mask, const char *comm_name,
                   int n_nodes, int nranks, int rank, log_fn_t log) {
  (void)comm_name;
  (void)n_nodes;
  (void)log;
  return common_init(context, mask, comm_id, nranks, rank, 5);
}

/* ------------------------------------------------------------------ */
/* Version 4 (NCCL 2.26, 2.27)                                         */
/* ------------------------------------------------------------------ */

static int init_v4(void **context, int *mask, const char *comm_name, uint64_t comm_hash,
                   int n_nodes, int nranks, int rank, log_fn_t log) {
  (void)comm_name;
  (void)n_nodes;
  (void)log;
  return common_init(context, mask, comm_hash, nranks, rank, 4);
}

/* ------------------------------------------------------------------ */
/* Versions 3 (NCCL 2.25) and 2 (NCCL 2.24): no rank count at init.   */
/* ------------------------------------------------------------------ */

static int init_v3(void **context, int *mask) {
  return common_init(context, mask, 0, -1, -1, 3);
}

static int init_v2(void **context, int *mask) {
  return common_init(context, mask, 0, -1, -1, 2);
}

static void p2p_v3_event(struct collbench_event *e, const struct p2p_v3 *p) {
  e->kind = CB_KIND_P2P;
  e->comm_hash = p->comm_hash;
  e->count = p->count;
  e->peer = p->peer;
  copy_name(e->func, p->func);
  copy_name(e->datatype, p->datatype);
}

START_EVENT(5, COLL_V45, P2P_V45)
START_EVENT(4, COLL_V45, P2P_V45)
START_EVENT(3, COLL_V23, p2p_v3_event)
START_EVENT(2, COLL_V23, p2p_v3_event)

/* Shared by every version: nothing to stop, update or free. */
static int stop_event(void *handle) {
  (void)handle;
  return NCCL_OK;
}

static int record_state(void *handle, int state, void *args) {
  (void)handle;
  (void)state;
  (void)args;
  return NCCL_OK;
}

static int finalize(void *context) {
  (void)context;
  return NCCL_OK;
}

/* ------------------------------------------------------------------ */
/* The symbols NCCL looks up.                                          */
/* ------------------------------------------------------------------ */

/* ncclProfiler_vN: the same five members in every version; only init's
 * arguments and the descriptor type change. */
#define PROFILER(version, ...)                                       \
  struct profiler_v##version {                                       \
    const char *name;                                                \
    int (*init)(__VA_ARGS__);                                        \
    int (*start_event)(void *, void **, struct descr_v##version *); \
    int (*stop_event)(void *);                                       \
    int (*record_event_state)(void *, int, void *);                  \
    int (*finalize)(void *);                                         \
  };                                                                 \
  EXPORT struct profiler_v##version ncclProfiler_v##version = {      \
      "collbench", init_v##version, start_v##version, stop_event,    \
      record_state, finalize}

PROFILER(5, void **, uint64_t, int *, const char *, int, int, int, log_fn_t);
PROFILER(4, void **, int *, const char *, uint64_t, int, int, int, log_fn_t);
PROFILER(3, void **, int *);
PROFILER(2, void **, int *);

/* ------------------------------------------------------------------ */
/* collbench's side.                                                   */
/* ------------------------------------------------------------------ */

/* Layout version of `struct collbench_event`; collbench refuses others. */
EXPORT uint32_t collbench_profiler_abi(void) { return 1; }

/* sizeof(struct collbench_event), for collbench to check its mirror. */
EXPORT size_t collbench_profiler_event_size(void) { return sizeof(struct collbench_event); }

/* Recording on (non-zero) or off: sets every activation mask NCCL gave us. */
EXPORT void collbench_profiler_set_recording(int on) {
  pthread_mutex_lock(&lock);
  wanted_mask = on ? (PROFILE_COLL | PROFILE_P2P) : 0;
  for (int i = 0; i < n_masks; i++) __atomic_store_n(masks[i], wanted_mask, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&lock);
}

/* How many times NCCL called init, and through which interface version
 * (0 when NCCL never loaded the plugin). */
EXPORT int collbench_profiler_inits(int *version) {
  pthread_mutex_lock(&lock);
  int n = inits;
  if (version) *version = interface_version;
  pthread_mutex_unlock(&lock);
  return n;
}

/* Moves up to `max` records, oldest first, into `out`; returns how many.
 * `*lost` gets the events dropped since the last drain (and resets it). */
EXPORT size_t collbench_profiler_drain(struct collbench_event *out, size_t max, uint64_t *lost) {
  pthread_mutex_lock(&lock);
  size_t n = ring_len < max ? ring_len : max;
  for (size_t i = 0; i < n; i++) out[i] = ring[(ring_head + i) % RING_CAPACITY];
  ring_head = (ring_head + n) % RING_CAPACITY;
  ring_len -= n;
  if (lost) {
    *lost = dropped;
    dropped = 0;
  }
  pthread_mutex_unlock(&lock);
  return n;
}
