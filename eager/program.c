// Whole-graph programs (torch.compile): one graph built by the caller on
// dense inputs, compiled through the eager executor's caches, run on
// storages with in-place updates of mutated inputs by donation.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eager/internal.h"
#include "tpr/program.h"

typedef struct output {
  tpr_value_t value;
  int mutates;  // input index, or -1 for a fresh output
  tpr_type_t type;
} output_t;

struct tpr_program {
  tpr_graph_t* graph;
  int num_inputs;
  tpr_type_t* input_types;
  output_t* outputs;
  int num_outputs, cap_outputs;
  // The graph's run-time checks, compiled into one extra s32 result: 0, or
  // 1 + the index of the first false check.
  char** check_messages;
  int num_checks;
  bool sealed;            // results added (a failed compile may be retried)
  tpr_executable_t* exe;  // retained; NULL until compiled
  struct background* bg;  // a compile started by tpr_program_compile_start
};

// A compile on a thread of its own: a compile keeps only part of a
// machine's cores busy (XLA:CPU's gains 1.7x from a second core), so a
// forward and a backward compiled side by side finish sooner than in turn.
// The executor lock is not held while XLA compiles. A run before the
// compile ends queues its launch on a pending executable (the launch waits
// for the code, the caller does not); the thread then gives it the code
// and keeps it in the executor's caches itself, so a process that exits
// after one run still leaves it on disk.
typedef struct background {
  pthread_t thread;
  const tpr_program_t* program;  // sealed: its graph no longer changes
  uint64_t key[2];
  char* text;  // StableHLO, owned
  size_t len;
  char name[128];
  char* disk_path;  // owned; set: load this disk cache entry (compile if that fails)
  bool loaded;      // |exe| came from the disk cache
  bool corrupt;     // the entry was there and failed a check
  tpr_executable_t* exe;  // the result, or NULL with |status|
  tpr_status_t status;
  pthread_mutex_t lock;        // guards the two below
  bool finished;               // |exe| / |status| are final
  tpr_executable_t* pending;   // retained; NULL unless a run came first
  bool joined;                 // the thread was joined (finish_background)
} background_t;

static tpr_program_stats_t stats;  // guarded by the executor lock

tpr_status_t tpr_program_create(const tpr_type_t* input_types, int num_inputs,
                                tpr_program_t** out_program,
                                tpr_value_t* out_inputs) {
  *out_program = NULL;
  if (num_inputs < 0 || (num_inputs && (!input_types || !out_inputs)))
    return TPR_ERR(INVALID_ARGUMENT, "bad program inputs");
  tpr_program_t* p = tpr_calloc(1, sizeof *p);
  if (!p) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  tpr_status_t s = tpr_graph_create(&p->graph);
  if (tpr_status_is_ok(s) && num_inputs) {
    p->input_types = tpr_malloc((size_t)num_inputs * sizeof *p->input_types);
    if (!p->input_types) s = TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  }
  if (!tpr_status_is_ok(s)) {
    tpr_program_free(p);
    return s;
  }
  p->num_inputs = num_inputs;
  for (int i = 0; i < num_inputs; i++) {
    const tpr_type_t* t = &input_types[i];
    if (!tpr_dtype_size(t->dtype) || t->rank < 0 || t->rank > TPR_MAX_RANK) {
      tpr_program_free(p);
      return TPR_ERR(INVALID_ARGUMENT, "program input %d has an unsupported type", i);
    }
    p->input_types[i] = *t;
    // The storage's rank-1 buffer, reshaped to the tensor.
    int64_t n = tpr_type_numel(t);
    tpr_value_t flat = tpr_parameter(p->graph, tpr_type_make(t->dtype, 1, &n));
    out_inputs[i] = tpr_reshape(p->graph, flat, t->rank, t->dims);
  }
  *out_program = p;
  return tpr_graph_status(p->graph);
}

static void background_free(background_t* b) {
  if (!b) return;
  if (!b->joined) pthread_join(b->thread, NULL);
  pthread_mutex_destroy(&b->lock);
  tpr_executable_release(b->pending);
  tpr_executable_release(b->exe);
  tpr_status_free(b->status);
  tpr_free(b->text);
  tpr_free(b->disk_path);
  tpr_free(b);
}

void tpr_program_free(tpr_program_t* p) {
  if (!p) return;
  background_free(p->bg);
  tpr_graph_free(p->graph);
  tpr_executable_release(p->exe);
  tpr_free(p->input_types);
  tpr_free(p->outputs);
  for (int i = 0; i < p->num_checks; i++) tpr_free(p->check_messages[i]);
  tpr_free(p->check_messages);
  tpr_free(p);
}

tpr_graph_t* tpr_program_graph(tpr_program_t* p) { return p->graph; }
int tpr_program_num_outputs(const tpr_program_t* p) { return p->num_outputs; }

const tpr_type_t* tpr_program_output_type(const tpr_program_t* p, int index) {
  return &p->outputs[index].type;
}

tpr_status_t tpr_program_add_output(tpr_program_t* p, tpr_value_t v,
                                    int mutates) {
  if (p->sealed) return TPR_ERR(FAILED_PRECONDITION, "the program is already compiled");
  TPR_RETURN_IF_ERROR(tpr_graph_status(p->graph));
  const tpr_type_t* t = tpr_value_type(p->graph, v);
  if (t->dtype == TPR_DTYPE_INVALID)
    return TPR_ERR(INVALID_ARGUMENT, "program output %d is not a value", p->num_outputs);
  if (mutates >= p->num_inputs)
    return TPR_ERR(INVALID_ARGUMENT, "output mutates input %d of %d", mutates,
                   p->num_inputs);
  if (mutates >= 0 && !tpr_type_equal(t, &p->input_types[mutates])) {
    char a[96], b[96];
    return TPR_ERR(INVALID_ARGUMENT, "the new value of input %d is %s, the input is %s",
                   mutates, tpr_type_format(t, a, sizeof a),
                   tpr_type_format(&p->input_types[mutates], b, sizeof b));
  }
  if (p->num_outputs == p->cap_outputs) {
    int nc = p->cap_outputs ? 2 * p->cap_outputs : 8;
    output_t* o = tpr_realloc(p->outputs, (size_t)nc * sizeof *o);
    if (!o) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
    p->outputs = o;
    p->cap_outputs = nc;
  }
  output_t* o = &p->outputs[p->num_outputs++];
  o->value = v;
  o->mutates = mutates;
  o->type = *t;
  return tpr_ok_status();
}

// Adds the result that says which run-time check failed first (see
// struct tpr_program) and keeps the checks' messages.
static tpr_status_t take_checks(tpr_program_t* p) {
  tpr_graph_t* g = p->graph;
  int n = tpr_graph_num_checks(g);
  if (n == 0) return tpr_ok_status();
  p->check_messages = tpr_calloc((size_t)n, sizeof *p->check_messages);
  if (!p->check_messages) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  p->num_checks = n;  // entries stay NULL until copied (free handles both)
  tpr_value_t failed = tpr_constant_i64(g, TPR_DTYPE_S32, 0);
  for (int i = n - 1; i >= 0; i--) {
    const char* msg = tpr_graph_check_message(g, i);
    p->check_messages[i] = tpr_malloc(strlen(msg) + 1);
    if (!p->check_messages[i]) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
    strcpy(p->check_messages[i], msg);
    failed = tpr_select(g, tpr_graph_check_value(g, i), failed,
                        tpr_constant_i64(g, TPR_DTYPE_S32, i + 1));
  }
  tpr_graph_add_result(g, failed);
  return tpr_graph_status(g);
}

// Adds the outputs as results (flat like the storages that receive them; a
// mutated input's result may reuse its parameter's buffer: donation), then
// the checks' result. Once: a failed compile may be retried.
static tpr_status_t seal(tpr_program_t* p) {
  bool* aliased = tpr_calloc((size_t)p->num_inputs + 1, sizeof *aliased);
  if (!aliased) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  for (int i = 0; i < p->num_outputs; i++) {
    output_t* o = &p->outputs[i];
    int64_t n = tpr_type_numel(&o->type);
    int r = tpr_graph_add_result(p->graph, tpr_reshape(p->graph, o->value, 1, &n));
    // Two new values for one input cannot both take its buffer.
    if (o->mutates >= 0 && !aliased[o->mutates]) {
      tpr_graph_alias(p->graph, o->mutates, r);
      aliased[o->mutates] = true;
    }
  }
  tpr_free(aliased);
  p->sealed = true;
  return take_checks(p);
}

// Background compiles in flight, which exit waits for (XLA's compiler must
// not run while the process tears its state down).
static pthread_mutex_t bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_idle = PTHREAD_COND_INITIALIZER;
static int bg_running;

// Lock held: what |b| got goes to the caches (a loaded entry to memory only),
// and the disk cache counts the load it tried.
static void keep_background_locked(const background_t* b, tpr_executable_t* exe) {
  if (b->disk_path) tpr_disk_cache_count_read(b->disk_path, b->loaded, b->corrupt);
  if (!exe || tpr_exec_cache_find(b->key)) return;
  const tpr_graph_t* g = b->program->graph;
  tpr_status_t s = b->loaded ? tpr_exec_cache_insert(b->key, exe, 16 + tpr_graph_num_nodes(g))
                             : tpr_eager_keep_executable_locked(g, b->key, exe);
  tpr_status_free(s);
}

// The code from the disk cache entry, or (no entry, or one that fails its
// checks) from XLA.
static tpr_status_t background_get(background_t* b, tpr_executable_t** exe) {
  if (b->disk_path) {
    tpr_status_t s = tpr_disk_cache_read(b->disk_path, b->key, exe, &b->corrupt);
    b->loaded = tpr_status_is_ok(s);
    if (b->loaded) return s;
    tpr_status_free(s);
    // (The graph is sealed: emitting it only reads it.)
    TPR_RETURN_IF_ERROR(tpr_graph_emit_stablehlo(b->program->graph, &b->text, &b->len));
  }
  double t0 = tpr_now_seconds();
  tpr_status_t s = tpr_executable_compile(tpr_eager_client(), b->text, b->len, exe);
  if (tpr_status_is_ok(s) && getenv("TORCH_TPU_LOG_COMPILES"))
    fprintf(stderr, "torch_tpu: compiled %s (%zu bytes of StableHLO, in the background) "
                    "in %.1f ms\n", b->name, b->len, 1e3 * (tpr_now_seconds() - t0));
  return s;
}

static void* background_compile(void* arg) {
  background_t* b = arg;
  tpr_runtime_mark_background_thread();
  tpr_executable_t* exe = NULL;
  tpr_status_t status = background_get(b, &exe);
  pthread_mutex_lock(&b->lock);
  b->exe = exe;
  b->status = status;
  b->finished = true;
  tpr_executable_t* pending = b->pending;
  pthread_mutex_unlock(&b->lock);
  if (pending) {
    // Launches are waiting: give them the code (before taking the executor
    // lock, which their caller may hold while it waits for them), then keep
    // the executable in the caches, as compile() would have.
    tpr_executable_fulfil(pending, exe,
                          exe ? tpr_ok_status()
                              : tpr_status_make(tpr_status_code(status), "%s",
                                                tpr_status_message(status)));
    tpr_eager_lock();
    keep_background_locked(b, exe ? pending : NULL);
    if (exe) {
      if (b->loaded)
        stats.programs_cached++;
      else
        stats.programs_compiled++;
    }
    tpr_eager_unlock();
  }
  pthread_mutex_lock(&bg_lock);
  bg_running--;
  pthread_cond_broadcast(&bg_idle);
  pthread_mutex_unlock(&bg_lock);
  return NULL;
}

bool tpr_program_wait_for_compiles(double timeout_seconds) {
  return tpr_wait_for_zero(&bg_lock, &bg_idle, &bg_running, timeout_seconds);
}

// Starts |b| (key set; text or disk_path set) on a thread of its own; frees
// it if no thread starts.
static tpr_status_t start_background(tpr_program_t* p, background_t* b, const char* name) {
  snprintf(b->name, sizeof b->name, "%s", name ? name : "a program");
  b->program = p;
  pthread_mutex_init(&b->lock, NULL);
  pthread_mutex_lock(&bg_lock);
  bg_running++;
  pthread_mutex_unlock(&bg_lock);
  if (pthread_create(&b->thread, NULL, background_compile, b) == 0) {
    p->bg = b;
    return tpr_ok_status();
  }
  pthread_mutex_lock(&bg_lock);
  bg_running--;
  pthread_mutex_unlock(&bg_lock);
  pthread_mutex_destroy(&b->lock);
  b->joined = true;  // (no thread)
  b->program = NULL;
  tpr_free(b->text);
  tpr_free(b->disk_path);
  tpr_free(b);
  return TPR_ERR(RESOURCE_EXHAUSTED, "cannot start a thread");
}

static tpr_status_t check_startable(tpr_program_t* p) {
  if (!tpr_eager_client())
    return TPR_ERR(FAILED_PRECONDITION, "the tpu runtime is not initialized");
  if (!p->sealed) TPR_RETURN_IF_ERROR(seal(p));
  return tpr_graph_status(p->graph);
}

// tpr_program_load_start for a program already checked, whose graph hashes
// to |key|.
static tpr_status_t load_start_keyed(tpr_program_t* p, const uint64_t key[2], const char* name,
                                     bool* out_started) {
  *out_started = false;
  char path[4200];
  tpr_eager_lock();
  tpr_executable_t* exe = tpr_exec_cache_find(key);
  if (exe) {
    p->exe = tpr_executable_retain(exe);
    stats.programs_cached++;
  }
  bool on_disk = !exe && tpr_disk_cache_entry(key, path, sizeof path);
  tpr_eager_unlock();
  if (exe || !on_disk) {
    *out_started = exe != NULL;
    return tpr_ok_status();
  }
  background_t* b = tpr_calloc(1, sizeof *b);
  if (!b) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  memcpy(b->key, key, sizeof b->key);
  b->disk_path = tpr_malloc(strlen(path) + 1);
  if (!b->disk_path) {
    tpr_free(b);
    return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  }
  strcpy(b->disk_path, path);
  tpr_status_t s = start_background(p, b, name);
  *out_started = tpr_status_is_ok(s);
  tpr_status_free(s);  // no thread: compile() loads it here
  return tpr_ok_status();
}

tpr_status_t tpr_program_compile_start(tpr_program_t* p, const char* name) {
  if (p->exe || p->bg) return tpr_ok_status();
  TPR_RETURN_IF_ERROR(check_startable(p));
  // (Tiered: the first run compiles the quick tier, the full one follows.)
  if (tpr_tierup_enabled()) return tpr_ok_status();
  uint64_t key[2];
  tpr_graph_hash(p->graph, key);
  bool started = false;
  TPR_RETURN_IF_ERROR(load_start_keyed(p, key, name, &started));
  if (started) return tpr_ok_status();
  background_t* b = tpr_calloc(1, sizeof *b);
  if (!b) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  memcpy(b->key, key, sizeof b->key);
  tpr_status_t s = tpr_graph_emit_stablehlo(p->graph, &b->text, &b->len);
  if (!tpr_status_is_ok(s)) {
    tpr_free(b);
    return s;  // errors of the emission surface again at compile()
  }
  s = start_background(p, b, name);
  tpr_status_free(s);  // no thread: compile() compiles here
  return tpr_ok_status();
}

tpr_status_t tpr_program_load_start(tpr_program_t* p, const char* name, bool* out_started) {
  *out_started = p->exe || p->bg;
  if (*out_started) return tpr_ok_status();
  TPR_RETURN_IF_ERROR(check_startable(p));
  uint64_t key[2];
  tpr_graph_hash(p->graph, key);
  return load_start_keyed(p, key, name, out_started);
}

// Waits for |p|'s background compile and, if it succeeded, makes its
// executable the program's (through the caches, as a compile here would).
static void finish_background(tpr_program_t* p, bool* out_compiled) {
  background_t* b = p->bg;
  p->bg = NULL;
  pthread_join(b->thread, NULL);
  b->joined = true;
  if (b->pending && b->exe) {
    // The thread gave its code to the launches' executable, kept and
    // counted it.
    p->exe = tpr_executable_retain(b->pending);
    if (out_compiled) *out_compiled = !b->loaded;
  } else if (!b->pending) {
    tpr_eager_lock();
    tpr_executable_t* exe = tpr_exec_cache_find(b->key);  // compiled meanwhile?
    bool kept = b->exe && !exe;
    keep_background_locked(b, b->exe);
    if (kept) {
      exe = b->exe;
      if (out_compiled) *out_compiled = !b->loaded;
      if (b->loaded)
        stats.programs_cached++;
      else
        stats.programs_compiled++;
    } else if (b->exe) {
      stats.programs_cached++;
    }
    if (exe || b->exe) p->exe = tpr_executable_retain(exe ? exe : b->exe);
    tpr_eager_unlock();
  }
  // A failed compile is made again by the caller, which reports its error.
  background_free(b);
}

// The executable a run launches (+1): the program's, or, while its
// background compile runs, a pending one the launch waits on; fetched from
// the caches (or compiled) here when a compile was started and is over.
static tpr_status_t executable_for_run(tpr_program_t* p, tpr_executable_t** out) {
  *out = NULL;
  background_t* b = p->bg;
  if (!p->exe && b) {
    tpr_status_t s = tpr_ok_status();
    pthread_mutex_lock(&b->lock);
    if (!b->finished && !b->pending) {
      int n = p->num_outputs + (p->num_checks > 0);
      int32_t* dtypes = tpr_calloc((size_t)n + 1, sizeof *dtypes);
      int32_t* ranks = tpr_calloc((size_t)n + 1, sizeof *ranks);
      int64_t* dims = tpr_calloc(((size_t)n + 1) * TPR_MAX_RANK, sizeof *dims);
      if (dtypes && ranks && dims) {
        for (int k = 0; k < p->num_outputs; k++) {  // flat, as seal() adds them
          dtypes[k] = p->outputs[k].type.dtype;
          ranks[k] = 1;
          dims[(size_t)k * TPR_MAX_RANK] = tpr_type_numel(&p->outputs[k].type);
        }
        if (p->num_checks) dtypes[p->num_outputs] = TPR_DTYPE_S32;  // a scalar
        s = tpr_executable_create_pending(tpr_eager_client(), (size_t)n, dtypes, ranks,
                                          dims, &b->pending);
      } else {
        s = TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
      }
      tpr_free(dtypes);
      tpr_free(ranks);
      tpr_free(dims);
    }
    if (!b->finished && b->pending) *out = tpr_executable_retain(b->pending);
    pthread_mutex_unlock(&b->lock);
    if (*out || !tpr_status_is_ok(s)) return s;
  }
  if (!p->exe && !p->sealed)
    return TPR_ERR(FAILED_PRECONDITION, "the program is not compiled");
  if (!p->exe) TPR_RETURN_IF_ERROR(tpr_program_compile(p, "a compiled program", NULL));
  *out = tpr_executable_retain(p->exe);
  return tpr_ok_status();
}

tpr_status_t tpr_program_compile(tpr_program_t* p, const char* name,
                                 bool* out_compiled) {
  if (out_compiled) *out_compiled = false;
  if (p->bg) finish_background(p, out_compiled);
  if (p->exe) return tpr_ok_status();
  if (!tpr_eager_client())
    return TPR_ERR(FAILED_PRECONDITION, "the tpu runtime is not initialized");
  if (!p->sealed) TPR_RETURN_IF_ERROR(seal(p));
  TPR_RETURN_IF_ERROR(tpr_graph_status(p->graph));
  tpr_eager_lock();
  tpr_runtime_stats_t before, after;
  tpr_runtime_get_stats(&before);
  tpr_executable_t* exe = NULL;
  tpr_status_t s = tpr_eager_get_executable_locked(p->graph, name, &exe);
  tpr_runtime_get_stats(&after);
  bool compiled = after.compiles != before.compiles;
  if (tpr_status_is_ok(s)) {
    p->exe = tpr_executable_retain(exe);
    if (compiled)
      stats.programs_compiled++;
    else
      stats.programs_cached++;
  }
  tpr_eager_unlock();
  if (out_compiled) *out_compiled = compiled;
  if (!tpr_status_is_ok(s)) s = tpr_status_annotate(s, "compiling %s", name);
  return s;
}

// Lock held (the buffer may be swapped concurrently otherwise). An input
// without elements takes any storage: run_locked passes an empty buffer.
static bool storage_is_input(const tpr_type_t* t, const tpr_storage_t* s) {
  tpr_buffer_t* b = s ? s->buffer : NULL;
  int64_t n = tpr_type_numel(t);
  if (n == 0) return s != NULL;
  return b && tpr_buffer_dtype(b) == t->dtype && tpr_buffer_rank(b) == 1 &&
         tpr_buffer_numel(b) == n &&
         s->nbytes == (size_t)n * tpr_dtype_size(t->dtype);
}

bool tpr_program_input_ok(const tpr_program_t* p, int index,
                          const tpr_tensor_ref_t* ref) {
  if (index < 0 || index >= p->num_inputs || !ref->storage) return false;
  const tpr_type_t* t = &p->input_types[index];
  if (ref->dtype != t->dtype || ref->rank != t->rank) return false;
  if (tpr_type_numel(t) == 0) {  // no elements: no layout to match
    for (int i = 0; i < t->rank; i++)
      if (ref->sizes[i] != t->dims[i]) return false;
    return true;
  }
  if (ref->offset != 0) return false;
  // The input's sizes, laid out row-major.
  int64_t dense = 1;
  for (int i = t->rank - 1; i >= 0; dense *= t->dims[i--])
    if (ref->sizes[i] != t->dims[i] || (t->dims[i] != 1 && ref->strides[i] != dense))
      return false;
  tpr_eager_lock();
  tpr_status_t s = tpr_fused_settle_locked(ref->storage, TPR_CUT_OTHER);
  bool ok = tpr_status_is_ok(s) && storage_is_input(t, ref->storage);
  tpr_eager_unlock();
  tpr_status_free(s);
  return ok;
}

// Whether output |k| of a launch with these donations is a new buffer (not
// the donated buffer of the input it updates).
static bool takes_new_buffer(const tpr_program_t* p, const bool* donate, int k) {
  int m = p->outputs[k].mutates;
  return m < 0 || !donate[m] || tpr_graph_result_alias(p->graph, k) != m;
}

static tpr_status_t run_locked(tpr_program_t* p, tpr_executable_t* exe, int device,
                               tpr_storage_t* const* inputs,
                               tpr_storage_t* const* outputs,
                               tpr_buffer_t** args, bool* donate,
                               tpr_buffer_t** results) {
  for (int i = 0; i < p->num_inputs; i++)
    TPR_RETURN_IF_ERROR(tpr_fused_settle_locked(inputs[i], TPR_CUT_OTHER));
  for (int i = 0; i < p->num_inputs; i++) {
    if (!storage_is_input(&p->input_types[i], inputs[i])) {
      char buf[96];
      return TPR_ERR(INVALID_ARGUMENT,
                     "input %d is not a whole %s storage (materialise it first)",
                     i, tpr_type_format(&p->input_types[i], buf, sizeof buf));
    }
  }
  // A tensor without elements may have no buffer, or share a larger one:
  // the program gets an empty buffer of its own (released below).
  tpr_status_t s = tpr_ok_status();
  for (int i = 0; i < p->num_inputs && tpr_status_is_ok(s); i++) {
    donate[i] = false;
    if (tpr_type_numel(&p->input_types[i]) != 0) {
      args[i] = inputs[i]->buffer;
      continue;
    }
    static const char kNothing[1];
    int64_t zero = 0;
    s = tpr_buffer_from_host(tpr_eager_client(), device, p->input_types[i].dtype,
                             &zero, 1, kNothing, &args[i]);
  }
  for (int k = 0; k < p->num_outputs && tpr_status_is_ok(s); k++) {
    int m = p->outputs[k].mutates;
    if (m < 0 || tpr_graph_result_alias(p->graph, k) != m ||
        tpr_type_numel(&p->input_types[m]) == 0)
      continue;
    // A storage passed twice (aliased inputs) keeps its buffer: donating one
    // argument would kill the other.
    bool shared = false;
    for (int j = 0; j < p->num_inputs && !shared; j++)
      shared = j != m && inputs[j] == inputs[m];
    donate[m] = !shared;
  }
  // What the launch allocates: the results that take no donated buffer.
  size_t fresh_bytes = 0;
  for (int k = 0; k < p->num_outputs && tpr_status_is_ok(s); k++)
    if (takes_new_buffer(p, donate, k))
      fresh_bytes += (size_t)tpr_type_numel(&p->outputs[k].type) *
                     tpr_dtype_size(p->outputs[k].type.dtype);
  // A launch that waits for its code allocates nothing until the code is
  // there: bounding the run-ahead by its bytes would only make this caller
  // wait for the compile, which is what queueing it spares.
  if (!tpr_executable_has_code(exe)) fresh_bytes = 0;
  if (tpr_status_is_ok(s)) {
    tpr_pending_reserve();
    s = tpr_executable_execute(exe, device, args, (size_t)p->num_inputs, donate,
                               results, tpr_eager_launch_blocking());
  }
  for (int i = 0; i < p->num_inputs; i++)
    if (tpr_type_numel(&p->input_types[i]) == 0) tpr_buffer_release(args[i]);
  TPR_RETURN_IF_ERROR(s);
  stats.runs++;
  if (p->num_outputs || p->num_checks) {
    // The new results, which the bound on results in flight watches.
    tpr_buffer_t** fresh_results = tpr_malloc((size_t)(p->num_outputs + 1) * sizeof(tpr_buffer_t*));
    int num_fresh = 0;
    for (int k = 0; fresh_results && k < p->num_outputs; k++)
      if (takes_new_buffer(p, donate, k))
        fresh_results[num_fresh++] = tpr_buffer_retain(results[k]);
    tpr_pending_push_results(results[0], fresh_results, num_fresh, fresh_bytes);
  }
  int fresh = 0;
  for (int k = 0; k < p->num_outputs; k++) {
    int m = p->outputs[k].mutates;
    tpr_storage_t* target = m >= 0 ? inputs[m] : outputs[fresh++];
    // A new value without elements changes nothing in the input's storage
    // (which may be a larger one that a zero-size view shares).
    if (m >= 0 && tpr_type_numel(&p->input_types[m]) == 0) target = NULL;
    if (target) {
      tpr_storage_swap_buffer(target, results[k]);
    } else {
      tpr_buffer_release(results[k]);
    }
    results[k] = NULL;
  }
  for (int i = 0; i < p->num_inputs; i++) stats.donated_buffers += donate[i];
  return tpr_ok_status();
}

tpr_status_t tpr_program_run(tpr_program_t* p, int device,
                             tpr_storage_t* const* inputs,
                             tpr_storage_t* const* outputs) {
  tpr_executable_t* exe = NULL;
  TPR_RETURN_IF_ERROR(executable_for_run(p, &exe));
  size_t ni = (size_t)p->num_inputs, no = (size_t)p->num_outputs + (p->num_checks > 0);
  // One block: argument buffers, donation flags, result buffers.
  void* block = tpr_calloc(1, (ni + 1) * (sizeof(tpr_buffer_t*) + sizeof(bool)) +
                                  (no + 1) * sizeof(tpr_buffer_t*));
  if (!block) {
    tpr_executable_release(exe);
    return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  }
  tpr_buffer_t** args = block;
  tpr_buffer_t** results = args + ni + 1;
  bool* donate = (bool*)(results + no + 1);
  tpr_eager_lock();
  tpr_status_t s = run_locked(p, exe, device, inputs, outputs, args, donate, results);
  tpr_eager_unlock();
  tpr_executable_release(exe);
  // The checks' result (run_locked leaves it): waiting for it makes the
  // failure this run's error, as PyTorch's eager kernels raise theirs.
  tpr_buffer_t* checked = p->num_checks ? results[p->num_outputs] : NULL;
  if (tpr_status_is_ok(s) && checked) {
    int32_t failed = 0;
    s = tpr_buffer_to_host(checked, &failed, sizeof failed);
    // FAILED_PRECONDITION: a RuntimeError, as PyTorch raises for these.
    if (tpr_status_is_ok(s) && failed > 0 && failed <= p->num_checks)
      s = TPR_ERR(FAILED_PRECONDITION, "%s", p->check_messages[failed - 1]);
  }
  tpr_buffer_release(checked);
  tpr_free(block);
  return s;
}

void tpr_program_get_stats(tpr_program_stats_t* out) {
  tpr_eager_lock();
  *out = stats;
  tpr_eager_unlock();
}

void tpr_program_reset_stats(void) {
  tpr_eager_lock();
  memset(&stats, 0, sizeof stats);
  tpr_eager_unlock();
}
