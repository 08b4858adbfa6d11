/*
 * collbench_tuner.c: the NCCL tuner plugin that travels inside collbench.
 *
 * collbench embeds the compiled library (include_bytes!), writes it to a
 * private temporary file and points NCCL_TUNER_PLUGIN at it before the
 * first communicator is created. NCCL then calls getCollInfo() for every
 * collective, and this plugin picks the algorithm, protocol and channel
 * count from, in order:
 *
 *   1. an override collbench sets at run time (collbench_tuner_set_override),
 *      used by `collbench tune` to measure one candidate at a time in one
 *      process;
 *   2. the first matching rule of a tuner config file in the CSV format of
 *      NCCL's example tuner plugin (collbench_tuner_load, or at the first
 *      init the file named by COLLBENCH_TUNER_CONFIG, else by
 *      NCCL_TUNER_CONFIG_FILE), used by `collbench run --tuner-config`;
 *   3. otherwise nothing: NCCL keeps its own choice, channels included.
 *
 * The file format and the matching rule are those of NCCL's example
 * plugin: collective_type,min_bytes,max_bytes,algorithm,protocol,channels,
 * nNodes,nRanks[,numPipeOps[,regBuff]]; '#' in the first column starts a
 * comment; -1 is "any" (channels: NCCL's choice); the first rule in file
 * order that matches and whose algorithm/protocol NCCL offers for the call
 * wins. Unlike the example plugin, this one refuses a malformed line
 * instead of reading it as something else, leaves the channel count alone
 * when no rule matches (the example sets 1), and reads NCCL's cost table
 * as the contiguous [algorithm][protocol] array NCCL passes.
 *
 * ABI: ncclTuner_v5 as declared in NCCL 2.28's tuner.h (ext-tuner). The
 * declarations below restate its layout; only the exported symbol
 * ncclTunerPlugin_v5 and the types it uses must match NCCL.
 *
 * Build check: gcc -shared -fPIC -O2 -Wall -Werror -o t.so collbench_tuner.c
 */

/* getline() and strerror() also under a strict -std=c99/c11. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- NCCL tuner ABI (v5) ------------------------------------------------ */

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

#define CB_LOG_SUBSYS_TUNING 64UL /* NCCL_TUNING */

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

/* Collective ids NCCL hands getCollInfo (ncclFunc_t). */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclNumFuncs = 8
} ncclFunc_t;

#define CB_NUM_ALGORITHMS 7 /* tree ring collnet_direct collnet_chain nvls nvls_tree pat */
#define CB_NUM_PROTOCOLS 3  /* ll ll128 simple */
#define CB_NUM_HW_LINKS 3
#define CB_NUM_COMPCAPS 4
#define CB_NUM_TUNING_SCALES 3
#define CB_ALGO_PROTO_IGNORE (-1.0f)

typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

typedef struct {
  double baseLatencies[CB_NUM_ALGORITHMS][CB_NUM_PROTOCOLS];
  double hwLatencies[CB_NUM_HW_LINKS][CB_NUM_ALGORITHMS][CB_NUM_PROTOCOLS];
  double llMaxBws[CB_NUM_COMPCAPS][CB_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[CB_NUM_COMPCAPS][CB_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[CB_NUM_COMPCAPS][CB_NUM_TUNING_SCALES];
  double perChMaxTreeBws[CB_NUM_COMPCAPS][CB_NUM_TUNING_SCALES];
} ncclTunerConstants_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
} ncclTuner_v5_t;

/* ---- rules ---------------------------------------------------------------- */

typedef struct {
  int coll;                /* ncclFunc_t */
  unsigned long long minBytes, maxBytes;
  int algo, proto;         /* cost table indices */
  int channels;            /* -1: NCCL's choice */
  int nNodes, nRanks;      /* -1: any */
  int numPipeOps, regBuff; /* -1: any */
} cb_rule;

typedef struct {
  int active;
  int coll;        /* -1: every collective */
  int algo, proto; /* both -1: NCCL's choice */
  int channels;    /* 0: NCCL's choice */
} cb_override;

/* Process-wide state: rules and override are shared by every communicator
 * (collbench runs one configuration at a time), guarded by one mutex since
 * collbench switches them from its own thread between collectives. */
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static cb_rule* cb_rules = NULL;
static int cb_nrules = 0;
static int cb_loaded_once = 0;
static cb_override cb_ovr = {0, -1, -1, -1, 0};
static char cb_error[512] = "";
static uint64_t cb_calls = 0, cb_applied = 0, cb_rejected = 0;

/* The last call's outcome per collective: the pair the cost table now
 * points NCCL to (claimed, or NCCL's own lowest cost) and the channel
 * count the plugin set (0: NCCL's own). */
typedef struct {
  int seen, algo, proto, channels;
} cb_choice;
static cb_choice cb_last[ncclFuncAllReduce + 1];

typedef struct {
  size_t nRanks, nNodes;
  ncclDebugLogger_t log;
} cb_context;

static const char* const cb_coll_names[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
static const char* const cb_algo_names[CB_NUM_ALGORITHMS] = {"tree",  "ring",      "collnet_direct", "collnet_chain",
                                                             "nvls",  "nvls_tree", "pat"};
static const char* const cb_proto_names[CB_NUM_PROTOCOLS] = {"ll", "ll128", "simple"};

static int cb_lookup_name(const char* s, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

/* Whole decimal number (digits only) into *out; 0 on success. */
static int cb_parse_u64(const char* s, unsigned long long* out) {
  if (*s == '\0') return -1;
  for (const char* p = s; *p; p++)
    if (*p < '0' || *p > '9') return -1;
  errno = 0;
  char* end = NULL;
  *out = strtoull(s, &end, 10);
  return (errno != 0 || *end != '\0') ? -1 : 0;
}

/* Integer in [lo, hi] or exactly -1 when allow_any; 0 on success. */
static int cb_parse_int(const char* s, int allow_any, long lo, long hi, int* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || errno != 0 || *end != '\0') return -1;
  if ((allow_any && v == -1) || (v >= lo && v <= hi)) {
    *out = (int)v;
    return 0;
  }
  return -1;
}

static char* cb_trim(char* s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) s[--n] = '\0';
  return s;
}

/* Parses one line. Returns 1 for a rule, 0 for a comment/blank line, -1
 * for a malformed line (with the reason in why). */
static int cb_parse_line(char* line, cb_rule* r, const char** why) {
  if (line[0] == '#') return 0;
  char* t = cb_trim(line);
  if (*t == '\0') return 0;
  if (*t == '#') {
    *why = "comment not in the first column";
    return -1;
  }
  char* f[11];
  int n = 0;
  char* p = t;
  for (;;) {
    char* comma = strchr(p, ',');
    if (n == 11) break;
    f[n++] = p;
    if (!comma) break;
    *comma = '\0';
    p = comma + 1;
  }
  if (n < 8 || n > 10) {
    *why = "needs 8, 9 or 10 fields";
    return -1;
  }
  for (int i = 0; i < n; i++) {
    f[i] = cb_trim(f[i]);
    if (*f[i] == '\0') {
      *why = "empty field";
      return -1;
    }
  }
  if ((r->coll = cb_lookup_name(f[0], cb_coll_names, 5)) < 0) {
    *why = "unknown collective_type";
    return -1;
  }
  if (cb_parse_u64(f[1], &r->minBytes) || cb_parse_u64(f[2], &r->maxBytes) || r->minBytes > r->maxBytes) {
    *why = "bad min_bytes/max_bytes";
    return -1;
  }
  if ((r->algo = cb_lookup_name(f[3], cb_algo_names, CB_NUM_ALGORITHMS)) < 0) {
    *why = "unknown algorithm";
    return -1;
  }
  if ((r->proto = cb_lookup_name(f[4], cb_proto_names, CB_NUM_PROTOCOLS)) < 0) {
    *why = "unknown protocol";
    return -1;
  }
  if (cb_parse_int(f[5], 1, 1, 1 << 20, &r->channels) || cb_parse_int(f[6], 1, 1, 1 << 30, &r->nNodes) ||
      cb_parse_int(f[7], 1, 1, 1 << 30, &r->nRanks)) {
    *why = "bad channels/nNodes/nRanks (a positive number or -1)";
    return -1;
  }
  r->numPipeOps = -1;
  r->regBuff = -1;
  if (n >= 9 && cb_parse_int(f[8], 1, 1, 1 << 30, &r->numPipeOps)) {
    *why = "bad numPipeOps (a positive number or -1)";
    return -1;
  }
  if (n == 10 && cb_parse_int(f[9], 1, 0, 1, &r->regBuff)) {
    *why = "bad regBuff (0, 1 or -1)";
    return -1;
  }
  return 1;
}

/* Reads a whole file into a new rule array; on a malformed line, fills
 * cb_error and returns -1 without touching the current rules. Caller
 * holds cb_lock. */
static int cb_load_locked(const char* path) {
  FILE* fp = fopen(path, "r");
  if (!fp) {
    snprintf(cb_error, sizeof cb_error, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  cb_rule* rules = NULL;
  int n = 0, cap = 0, lineno = 0, status = 0;
  char* line = NULL;
  size_t linecap = 0;
  while (getline(&line, &linecap, fp) >= 0) {
    lineno++;
    cb_rule r;
    const char* why = "";
    int k = cb_parse_line(line, &r, &why);
    if (k < 0) {
      snprintf(cb_error, sizeof cb_error, "%s line %d: %s", path, lineno, why);
      status = -1;
      break;
    }
    if (k == 0) continue;
    if (n == cap) {
      int ncap = cap ? 2 * cap : 16;
      cb_rule* grown = (cb_rule*)realloc(rules, (size_t)ncap * sizeof *rules);
      if (!grown) {
        snprintf(cb_error, sizeof cb_error, "%s: out of memory", path);
        status = -1;
        break;
      }
      rules = grown;
      cap = ncap;
    }
    rules[n++] = r;
  }
  free(line);
  fclose(fp);
  if (status < 0) {
    free(rules);
    return -1;
  }
  free(cb_rules);
  cb_rules = rules;
  cb_nrules = n;
  cb_error[0] = '\0';
  return n;
}

/* ---- functions collbench calls (dlsym on the same library) -------------- */

/* Replaces the rules with those of `path` (NULL: drop all rules). Returns
 * the number of rules, or -1 with collbench_tuner_last_error() saying why
 * (the old rules stay). */
__attribute__((visibility("default"))) int collbench_tuner_load(const char* path) {
  pthread_mutex_lock(&cb_lock);
  int n;
  if (path == NULL) {
    free(cb_rules);
    cb_rules = NULL;
    cb_nrules = n = 0;
  } else {
    n = cb_load_locked(path);
  }
  cb_loaded_once = 1;
  pthread_mutex_unlock(&cb_lock);
  return n;
}

/* The last load error ("" if none). Valid until the next load. */
__attribute__((visibility("default"))) const char* collbench_tuner_last_error(void) { return cb_error; }

/* Forces a choice for every later call of collective `coll` (an ncclFunc_t
 * id, or -1 for all), ahead of any rule: `algo`/`proto` as cost table
 * indices (both -1: NCCL's choice; one alone is refused, as NCCL's tuner
 * interface does not allow it), `channels` > 0 or 0 for NCCL's choice.
 * Returns 0, or -1 for arguments out of range. */
__attribute__((visibility("default"))) int collbench_tuner_set_override(int coll, int algo, int proto,
                                                                        int channels) {
  if (coll < -1 || coll > ncclFuncAllReduce) return -1;
  if ((algo == -1) != (proto == -1)) return -1;
  if (algo < -1 || algo >= CB_NUM_ALGORITHMS || proto < -1 || proto >= CB_NUM_PROTOCOLS) return -1;
  if (channels < 0) return -1;
  pthread_mutex_lock(&cb_lock);
  cb_ovr.active = 1;
  cb_ovr.coll = coll;
  cb_ovr.algo = algo;
  cb_ovr.proto = proto;
  cb_ovr.channels = channels;
  pthread_mutex_unlock(&cb_lock);
  return 0;
}

/* Back to the rules (or NCCL's choice). */
__attribute__((visibility("default"))) void collbench_tuner_clear_override(void) {
  pthread_mutex_lock(&cb_lock);
  cb_ovr.active = 0;
  pthread_mutex_unlock(&cb_lock);
}

/* Counters since load: getCollInfo calls, calls where an override or a rule
 * was applied, and calls where the forced algorithm/protocol was not
 * offered by NCCL (so NCCL chose instead: a measurement under that
 * override is not of the candidate). Any pointer may be NULL. */
__attribute__((visibility("default"))) void collbench_tuner_counters(uint64_t* calls, uint64_t* applied,
                                                                     uint64_t* rejected) {
  pthread_mutex_lock(&cb_lock);
  if (calls) *calls = cb_calls;
  if (applied) *applied = cb_applied;
  if (rejected) *rejected = cb_rejected;
  pthread_mutex_unlock(&cb_lock);
}

/* What the last call of collective `coll` (an ncclFunc_t id) left NCCL to
 * run: algorithm and protocol as cost table indices, and the channel count
 * the plugin set (0: NCCL chooses). With no override or rule this is
 * NCCL's own pick of algorithm and protocol (the lowest cost in its table,
 * as NCCL selects), which is how collbench names a channel-count-only
 * setting in a tuner CSV. Returns 0, or -1 if no such call was seen. */
__attribute__((visibility("default"))) int collbench_tuner_last_choice(int coll, int* algo, int* proto,
                                                                       int* channels) {
  if (coll < 0 || coll > ncclFuncAllReduce) return -1;
  pthread_mutex_lock(&cb_lock);
  cb_choice c = cb_last[coll];
  pthread_mutex_unlock(&cb_lock);
  if (!c.seen) return -1;
  if (algo) *algo = c.algo;
  if (proto) *proto = c.proto;
  if (channels) *channels = c.channels;
  return 0;
}

/* ---- the plugin ------------------------------------------------------------ */

static ncclResult_t cb_init(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                            ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                            ncclTunerConstants_v5_t* constants) {
  (void)commId;
  (void)nvlDomainInfo;
  (void)constants; /* NCCL's model constants stay as they are */
  cb_context* ctx = (cb_context*)calloc(1, sizeof *ctx);
  if (!ctx) return ncclSystemError;
  ctx->nRanks = nRanks;
  ctx->nNodes = nNodes;
  ctx->log = logFunction;

  pthread_mutex_lock(&cb_lock);
  if (!cb_loaded_once) {
    cb_loaded_once = 1;
    const char* path = getenv("COLLBENCH_TUNER_CONFIG");
    if (!path || !*path) path = getenv("NCCL_TUNER_CONFIG_FILE");
    if (path && *path && cb_load_locked(path) < 0) {
      /* A bad file is the user's mistake: fail the communicator loudly
       * rather than run untuned while claiming to be tuned. */
      if (logFunction)
        logFunction(NCCL_LOG_WARN, CB_LOG_SUBSYS_TUNING, __FILE__, __LINE__, "collbench tuner: %s", cb_error);
      pthread_mutex_unlock(&cb_lock);
      free(ctx);
      return ncclInvalidUsage;
    }
  }
  int n = cb_nrules;
  pthread_mutex_unlock(&cb_lock);
  if (logFunction)
    logFunction(NCCL_LOG_INFO, CB_LOG_SUBSYS_TUNING, __FILE__, __LINE__,
                "collbench tuner: %zu ranks, %zu nodes, %d rules", nRanks, nNodes, n);
  *context = ctx;
  return ncclSuccess;
}

/* Claims (algo, proto) in NCCL's cost table if NCCL offers it: its cost
 * becomes 0 and no other offered entry stays at or below 0. */
static int cb_claim(float* table, int numAlgo, int numProto, int algo, int proto) {
  if (algo >= numAlgo || proto >= numProto) return 0;
  if (table[algo * numProto + proto] == CB_ALGO_PROTO_IGNORE) return 0;
  for (int i = 0; i < numAlgo * numProto; i++)
    if (table[i] != CB_ALGO_PROTO_IGNORE && table[i] <= 0.0f) table[i] = 1.0f;
  table[algo * numProto + proto] = 0.0f;
  return 1;
}

/* Records the lowest-cost offered pair (first in table order on ties, as
 * NCCL scans) for collbench_tuner_last_choice. Caller holds cb_lock. */
static void cb_record(ncclFunc_t coll, const float* table, int numAlgo, int numProto, int channels) {
  if ((int)coll < 0 || (int)coll > ncclFuncAllReduce) return;
  int best = -1;
  for (int i = 0; i < numAlgo * numProto; i++)
    if (table[i] != CB_ALGO_PROTO_IGNORE && table[i] >= 0.0f && (best < 0 || table[i] < table[best])) best = i;
  if (best < 0) return;
  cb_last[coll].seen = 1;
  cb_last[coll].algo = best / numProto;
  cb_last[coll].proto = best % numProto;
  cb_last[coll].channels = channels;
}

static ncclResult_t cb_get_coll_info(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                     float** collCostTable, int numAlgo, int numProto, int regBuff,
                                     int* nChannels) {
  cb_context* ctx = (cb_context*)context;
  if (!ctx) return ncclInternalError;
  /* NCCL passes a contiguous float[numAlgo][numProto] cast to float**. */
  float* table = (float*)collCostTable;

  pthread_mutex_lock(&cb_lock);
  cb_calls++;
  if (cb_ovr.active && (cb_ovr.coll == -1 || cb_ovr.coll == (int)collType)) {
    int ok = 1;
    if (cb_ovr.algo >= 0) ok = cb_claim(table, numAlgo, numProto, cb_ovr.algo, cb_ovr.proto);
    if (ok) {
      if (cb_ovr.channels > 0) *nChannels = cb_ovr.channels;
      cb_applied++;
    } else {
      cb_rejected++;
    }
    cb_record(collType, table, numAlgo, numProto, *nChannels);
    pthread_mutex_unlock(&cb_lock);
    return ncclSuccess;
  }
  for (int i = 0; i < cb_nrules; i++) {
    const cb_rule* r = &cb_rules[i];
    if (r->coll != (int)collType || nBytes < r->minBytes || nBytes > r->maxBytes) continue;
    if (r->nNodes != -1 && r->nNodes != (int)ctx->nNodes) continue;
    if (r->nRanks != -1 && r->nRanks != (int)ctx->nRanks) continue;
    if (r->numPipeOps != -1 && r->numPipeOps != numPipeOps) continue;
    if (r->regBuff != -1 && r->regBuff != regBuff) continue;
    /* A rule NCCL cannot follow for this call is passed over. */
    if (!cb_claim(table, numAlgo, numProto, r->algo, r->proto)) continue;
    if (r->channels != -1) *nChannels = r->channels;
    cb_applied++;
    /* At INFO, like NCCL's own TUNING line for each call: one can tell the
     * plugin's answer from what NCCL then ran (bench/tuner_check.py). */
    if (ctx->log)
      ctx->log(NCCL_LOG_INFO, CB_LOG_SUBSYS_TUNING, __FILE__, __LINE__,
               "collbench tuner: %s %zu bytes -> rule %d (%s/%s, channels %d)", cb_coll_names[r->coll], nBytes, i,
               cb_algo_names[r->algo], cb_proto_names[r->proto], r->channels);
    break;
  }
  cb_record(collType, table, numAlgo, numProto, *nChannels);
  pthread_mutex_unlock(&cb_lock);
  return ncclSuccess;
}

static ncclResult_t cb_finalize(void* context) {
  free(context);
  return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = "collbench",
    .init = cb_init,
    .getCollInfo = cb_get_coll_info,
    .finalize = cb_finalize,
};
