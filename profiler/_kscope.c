/* profiler.scope's entry and exit, and the cupti path of kprof's kernelc launch hook, in C (knob native_scopes,
   built by profiler/_native.py; why: docs/performance.md, "Scopes and the kernelc hook in C").

   Each function does the same steps as the Python code (scopes._PyScope, hooks._enter/_exit) for the common
   case -- cupti backend, no session timing scopes on the host, no external correlation ids, the child scope or
   the launch's KernelLaunch already made -- and hands every other case to that Python code (set by setup() and
   setup_hooks()) before it has changed anything. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

static PyObject *g_fast;      /* context.fast: the plain threading.local holding .ctx */
static PyObject *g_cdict;     /* context.__dict__ (_clock, _ext, _kids) */
static PyObject *g_sdict;     /* session.__dict__ (timing, active, python_ctx, queue_metrics) */
static PyObject *g_slow_enter, *g_slow_exit;   /* scopes.py's Python methods: f(self) */
static PyObject *g_zero;
static PyObject *g_decorate, *g_repr;        /* scopes.py helpers: f(self, fn), f(self) */
static PyTypeObject *g_ctx_type;             /* context.ThreadContext: its slots read by offset */
static Py_ssize_t o_node = -1, o_kprev, o_stack, o_times, o_nodes;
static PyObject *g_time_ns;                  /* time.time_ns: read as clock_gettime(CLOCK_REALTIME) here */

static PyObject *s_ctx, *s_node, *s_kprev, *s_stack, *s_times, *s_nodes, *s_clock, *s_ext, *s_kids, *s_timing,
    *s_active, *s_python_ctx, *s_queue_metrics, *s_ext_changed, *s_metrics_q, *s_qmax, *s_drain, *s_append;

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *metrics;
} ScopeObject;

static int
Scope_init(ScopeObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"name", "metrics", NULL};
    PyObject *name, *metrics = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:scope", kwlist, &name, &metrics))
        return -1;
    if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0) {
        PyObject *r = PyObject_Repr(name);
        if (r != NULL) {
            PyErr_Format(PyExc_TypeError, "scope name must be a non-empty string, got %U", r);
            Py_DECREF(r);
        }
        return -1;
    }
    Py_INCREF(name);
    Py_XSETREF(self->name, name);
    Py_INCREF(metrics);
    Py_XSETREF(self->metrics, metrics);
    return 0;
}

static void
Scope_dealloc(ScopeObject *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->metrics);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
slow(PyObject *fn, PyObject *self)
{
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "profiler._kscope: setup() was not called");
        return NULL;
    }
    return PyObject_CallOneArg(fn, self);
}

/* A module global; NULL with no error when it is missing. */
static inline PyObject *
glob(PyObject *d, PyObject *key)
{
    return PyDict_GetItemWithError(d, key);
}


/* ThreadContext's slots, by offset (setup() checked they are member slots of that exact type) */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static inline void
slot_set(PyObject *obj, Py_ssize_t off, PyObject *v)
{
    PyObject *old = SLOT(obj, off);
    Py_INCREF(v);
    SLOT(obj, off) = v;
    Py_XDECREF(old);
}

static inline PyObject *
read_clock(PyObject *clock)
{
    if (clock == g_time_ns) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
            return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
    return PyObject_CallNoArgs(clock);
}

/* ctx.times.append(clock()); ctx.nodes.append(node); 0 or -1 with an error */
static int
timeline_fast(PyObject *ctx, PyObject *clock, PyObject *node)
{
    PyObject *t = read_clock(clock);   /* first: a Python clock may run code that replaces the lists */
    if (t == NULL)
        return -1;
    PyObject *times = SLOT(ctx, o_times), *nodes = SLOT(ctx, o_nodes);
    if (times == NULL || nodes == NULL || !PyList_CheckExact(times) || !PyList_CheckExact(nodes)) {
        Py_DECREF(t);
        PyErr_SetString(PyExc_TypeError, "a thread's timeline is not two lists");
        return -1;
    }
    int rc = PyList_Append(times, t);
    Py_DECREF(t);
    if (rc < 0)
        return -1;
    return PyList_Append(nodes, node);
}

/* timeline_fast with the session's clock, where one is set (scopes.py's _clock); 0 or -1 with an error */
static int
timeline_now(PyObject *ctx, PyObject *node)
{
    PyObject *clock = glob(g_cdict, s_clock);
    if (clock == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (clock == Py_None)
        return 0;
    Py_INCREF(clock);
    int rc = timeline_fast(ctx, clock, node);
    Py_DECREF(clock);
    return rc;
}

/* The thread's ThreadContext (a new reference), or NULL: with an error set, or without one where the Python
   method must run (the thread's first use of context.fast, a context of another type). */
static PyObject *
thread_ctx(void)
{
    PyObject *ctx = PyObject_GetAttr(g_fast, s_ctx);
    if (ctx == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Clear();
        return NULL;
    }
    if (Py_TYPE(ctx) != g_ctx_type) {
        Py_DECREF(ctx);
        return NULL;
    }
    return ctx;
}

/* Whether the Python method must run: 1 yes, 0 no, -1 error. */
static int
needs_python(int enter)
{
    if (g_fast == NULL || o_node < 0)
        return 1;
    PyObject *timing = glob(g_sdict, s_timing);
    if (timing == NULL)
        return PyErr_Occurred() ? -1 : 1;
    int t = PyObject_IsTrue(timing);   /* a session times scopes on the host (cpu backend) */
    if (t != 0)
        return t;
    if (enter) {   /* external correlation ids: the Python method (an exit handles them here) */
        PyObject *ext = glob(g_cdict, s_ext);
        if (ext == NULL)
            return PyErr_Occurred() ? -1 : 1;
        if (ext != Py_None)
            return 1;
    }
    return 0;
}

/* session.queue_metrics(node, name, metrics): (active, node, name, dict(metrics)) appended to session._metrics_q,
   drained past METRICS_Q_MAX; the Python function for a metrics mapping that is not a dict. 0 or -1. */
static int
queue_metrics(PyObject *nid, PyObject *name, PyObject *metrics)
{
    PyObject *q = glob(g_sdict, s_metrics_q), *active = glob(g_sdict, s_active), *qmax = glob(g_sdict, s_qmax);
    PyObject *r;
    if (q == NULL || active == NULL || qmax == NULL || !PyDict_CheckExact(metrics)) {
        if (PyErr_Occurred()) return -1;
        PyObject *fn = glob(g_sdict, s_queue_metrics);
        if (fn == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "profiler.session has no queue_metrics");
            return -1;
        }
        Py_INCREF(fn);
        r = PyObject_CallFunctionObjArgs(fn, nid, name, metrics, NULL);
        Py_DECREF(fn);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }
    Py_INCREF(q);
    PyObject *copy = PyDict_Copy(metrics);
    PyObject *item = copy == NULL ? NULL : PyTuple_Pack(4, active, nid, name, copy);
    Py_XDECREF(copy);
    r = item == NULL ? NULL : PyObject_CallMethodOneArg(q, s_append, item);
    Py_XDECREF(item);
    if (r == NULL) { Py_DECREF(q); return -1; }
    Py_DECREF(r);
    Py_ssize_t n = PyObject_Size(q);
    Py_DECREF(q);
    if (n < 0) return -1;
    Py_ssize_t lim = PyLong_AsSsize_t(qmax);
    if (lim == -1 && PyErr_Occurred()) return -1;
    if (n > lim) {
        PyObject *fn = glob(g_sdict, s_drain);
        if (fn == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "profiler.session has no drain_metrics");
            return -1;
        }
        Py_INCREF(fn);
        r = PyObject_CallNoArgs(fn);
        Py_DECREF(fn);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *
Scope_enter(ScopeObject *self, PyObject *unused)
{
    PyObject *self_o = (PyObject *)self;
    int np = needs_python(1);
    if (np != 0)
        return np < 0 ? NULL : slow(g_slow_enter, self_o);
    /* metrics: queued for the active sessions (session.queue_metrics); a session reading Python call
       paths takes the Python method */
    int queue = 0;
    if (self->metrics != NULL && self->metrics != Py_None) {
        int m = PyObject_IsTrue(self->metrics);
        if (m < 0) return NULL;
        PyObject *active = m ? glob(g_sdict, s_active) : NULL;
        if (active == NULL && PyErr_Occurred()) return NULL;
        int a = active == NULL ? 0 : PyObject_IsTrue(active);
        if (a < 0) return NULL;
        if (a) {
            PyObject *pyctx = glob(g_sdict, s_python_ctx);
            if (pyctx == NULL && PyErr_Occurred()) return NULL;
            int p = pyctx == NULL ? 0 : PyObject_IsTrue(pyctx);
            if (p != 0)
                return p < 0 ? NULL : slow(g_slow_enter, self_o);
            queue = 1;
        }
    }
    if (!PyUnicode_CheckExact(self->name))   /* a str subclass may hash or compare in Python */
        return slow(g_slow_enter, self_o);
    PyObject *ctx = thread_ctx();
    if (ctx == NULL)
        return PyErr_Occurred() ? NULL : slow(g_slow_enter, self_o);
    PyObject *parent = SLOT(ctx, o_node);
    if (parent != NULL && !PyLong_CheckExact(parent))   /* a kernelc launch that raised before its exit hook */
        parent = SLOT(ctx, o_kprev);
    PyObject *stack = SLOT(ctx, o_stack);
    PyObject *kids = glob(g_cdict, s_kids);
    PyObject *nid = NULL;
    if (parent != NULL && PyLong_CheckExact(parent) && stack != NULL && PyList_CheckExact(stack)
            && kids != NULL && PyList_CheckExact(kids)) {
        Py_ssize_t pi = PyLong_AsSsize_t(parent);
        if (pi == -1 && PyErr_Occurred())
            PyErr_Clear();
        else if (pi >= 0 && pi < PyList_GET_SIZE(kids)) {
            PyObject *kd = PyList_GET_ITEM(kids, pi);
            if (PyDict_CheckExact(kd))
                nid = PyDict_GetItemWithError(kd, self->name);   /* borrowed */
        }
    }
    if (nid == NULL) {   /* a new child (context.intern) or anything unusual: the Python method */
        Py_DECREF(ctx);
        return PyErr_Occurred() ? NULL : slow(g_slow_enter, self_o);
    }
    Py_INCREF(nid);
    Py_INCREF(parent);
    int rc = PyList_Append(stack, parent);
    Py_DECREF(parent);
    if (rc < 0) goto fail;
    slot_set(ctx, o_node, nid);
    rc = timeline_now(ctx, nid);
    if (rc < 0) goto fail;
    if (queue && queue_metrics(nid, self->name, self->metrics) < 0)
        goto fail;
    Py_DECREF(nid);
    Py_DECREF(ctx);
    Py_INCREF(self_o);
    return self_o;
fail:
    Py_DECREF(nid);
    Py_DECREF(ctx);
    return NULL;
}

static PyObject *
Scope_exit(ScopeObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *self_o = (PyObject *)self;
    int np = needs_python(0);
    if (np != 0)
        return np < 0 ? NULL : slow(g_slow_exit, self_o);
    PyObject *ctx = thread_ctx();
    if (ctx == NULL)
        return PyErr_Occurred() ? NULL : slow(g_slow_exit, self_o);
    PyObject *stack = SLOT(ctx, o_stack);
    if (stack == NULL || !PyList_CheckExact(stack)) {
        Py_DECREF(ctx);
        return slow(g_slow_exit, self_o);
    }
    PyObject *n;
    Py_ssize_t len = PyList_GET_SIZE(stack);
    if (len > 0) {
        n = PyList_GET_ITEM(stack, len - 1);
        Py_INCREF(n);
        if (PyList_SetSlice(stack, len - 1, len, NULL) < 0) {
            Py_DECREF(n);
            Py_DECREF(ctx);
            return NULL;
        }
    } else {
        n = g_zero;
        Py_INCREF(n);
    }
    slot_set(ctx, o_node, n);
    int rc = 0;
    PyObject *clock = glob(g_cdict, s_clock);
    if (clock == NULL && PyErr_Occurred()) rc = -1;
    else if (clock != NULL && clock != Py_None) {
        PyObject *ext = glob(g_cdict, s_ext);
        if (ext == NULL && PyErr_Occurred()) rc = -1;
        else if (ext == NULL || ext == Py_None) {
            Py_INCREF(clock);
            rc = timeline_fast(ctx, clock, n);
            Py_DECREF(clock);
        } else {   /* external correlation ids: context._ext_changed(ctx) */
            PyObject *fn = glob(g_cdict, s_ext_changed);
            if (fn == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_RuntimeError, "profiler.context has no _ext_changed");
                rc = -1;
            } else {
                Py_INCREF(fn);
                PyObject *r = PyObject_CallOneArg(fn, ctx);
                Py_DECREF(fn);
                if (r == NULL) rc = -1;
                else Py_DECREF(r);
            }
        }
    }
    Py_DECREF(n);
    Py_DECREF(ctx);
    if (rc < 0) return NULL;
    Py_RETURN_FALSE;
}

static PyObject *
Scope_call(ScopeObject *self, PyObject *args, PyObject *kwds)
{
    if (g_decorate == NULL || kwds != NULL || PyTuple_GET_SIZE(args) != 1) {
        PyErr_SetString(PyExc_TypeError, "profiler.scope(...) decorates one function");
        return NULL;
    }
    return PyObject_CallFunctionObjArgs(g_decorate, (PyObject *)self, PyTuple_GET_ITEM(args, 0), NULL);
}

static PyObject *
Scope_repr(ScopeObject *self)
{
    if (g_repr == NULL)
        return PyUnicode_FromFormat("profiler.scope(%R)", self->name ? self->name : Py_None);
    return PyObject_CallOneArg(g_repr, (PyObject *)self);
}

static PyMethodDef Scope_methods[] = {
    {"__enter__", (PyCFunction)Scope_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))Scope_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Scope_members[] = {
    {"name", T_OBJECT, offsetof(ScopeObject, name), 0, NULL},
    {"metrics", T_OBJECT, offsetof(ScopeObject, metrics), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ScopeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profiler.scope",
    .tp_basicsize = sizeof(ScopeObject),
    .tp_dealloc = (destructor)Scope_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A named region, as a context manager or a decorator.  ``metrics``: numbers such as\n"
              "``{\"flops\": ..., \"bytes\": ...}`` credited to this scope's frame each time it is entered.\n"
              "(Entry and exit in C: profiler/_kscope.c; profiler/scopes.py has the Python methods.)",
    .tp_methods = Scope_methods,
    .tp_members = Scope_members,
    .tp_init = (initproc)Scope_init,
    .tp_call = (ternaryfunc)Scope_call,
    .tp_repr = (reprfunc)Scope_repr,
    .tp_new = PyType_GenericNew,
};

static int
member_offset(PyTypeObject *tp, const char *name, Py_ssize_t *off)
{
    PyObject *d = PyDict_GetItemString(tp->tp_dict, name);   /* borrowed; the type's own slot */
    if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", tp->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX && m->type != T_OBJECT) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", tp->tp_name, name);
        return -1;
    }
    *off = m->offset;
    return 0;
}

/* setup(context_module, session_module, slow_enter, slow_exit, decorate, repr, time_ns) */
static PyObject *
setup(PyObject *mod, PyObject *args)
{
    PyObject *cmod, *smod, *se, *sx, *dec, *rep, *tns;
    if (!PyArg_ParseTuple(args, "OOOOOOO:setup", &cmod, &smod, &se, &sx, &dec, &rep, &tns))
        return NULL;
    PyObject *tp = PyObject_GetAttrString(cmod, "ThreadContext");
    if (tp == NULL) return NULL;
    if (!PyType_Check(tp)) {
        Py_DECREF(tp);
        PyErr_SetString(PyExc_TypeError, "context.ThreadContext is not a class");
        return NULL;
    }
    Py_ssize_t on, ok, os_, ot, ons;
    if (member_offset((PyTypeObject *)tp, "node", &on) < 0 || member_offset((PyTypeObject *)tp, "kprev", &ok) < 0
            || member_offset((PyTypeObject *)tp, "stack", &os_) < 0
            || member_offset((PyTypeObject *)tp, "times", &ot) < 0
            || member_offset((PyTypeObject *)tp, "nodes", &ons) < 0) {
        Py_DECREF(tp);
        return NULL;
    }
    PyObject *fast = PyObject_GetAttrString(cmod, "fast");
    if (fast == NULL) { Py_DECREF(tp); return NULL; }
    PyObject *cd = PyModule_GetDict(cmod), *sd = PyModule_GetDict(smod);
    if (cd == NULL || sd == NULL) { Py_DECREF(fast); Py_DECREF(tp); return NULL; }
    Py_XSETREF(g_ctx_type, (PyTypeObject *)tp);
    o_node = on; o_kprev = ok; o_stack = os_; o_times = ot; o_nodes = ons;
    Py_XSETREF(g_fast, fast);
    Py_INCREF(cd); Py_XSETREF(g_cdict, cd);
    Py_INCREF(sd); Py_XSETREF(g_sdict, sd);
    Py_INCREF(se); Py_XSETREF(g_slow_enter, se);
    Py_INCREF(sx); Py_XSETREF(g_slow_exit, sx);
    Py_INCREF(dec); Py_XSETREF(g_decorate, dec);
    Py_INCREF(rep); Py_XSETREF(g_repr, rep);
    Py_INCREF(tns); Py_XSETREF(g_time_ns, tns);
    Py_RETURN_NONE;
}


/* -- the kernelc launch hook (profiler/hooks.py's _enter/_exit on the cupti path) ------------------------------ */
static PyObject *g_hdict;                    /* hooks.__dict__ (_idle, _cupti, _kl_fast) */
static PyObject *g_hslow_enter, *g_hslow_exit;
static PyTypeObject *g_rec_type, *g_kl_type; /* kernelc's LaunchRecord, context.KernelLaunch */
static Py_ssize_t o_inherit, r_backend = -1, r_function, r_compiled, r_grid;
static PyObject *s_idle, *s_cupti, *s_kl_fast, *s_launch_metadata, *s_cuda;

static int member_offset(PyTypeObject *tp, const char *name, Py_ssize_t *off);

/* 1: the Python hook must run, 0: the C one may, -1: error; *idle set when no session records launches */
static int
hook_state(PyObject *rec, int *idle)
{
    *idle = 0;
    if (g_hdict == NULL || r_backend < 0 || o_node < 0 || Py_TYPE(rec) != g_rec_type)
        return 1;
    PyObject *v = glob(g_hdict, s_idle);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 1;
    int t = PyObject_IsTrue(v);
    if (t != 0) {
        if (t < 0) return -1;
        *idle = 1;
        return 1;
    }
    v = glob(g_hdict, s_cupti);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 1;
    t = PyObject_IsTrue(v);
    if (t <= 0)
        return t < 0 ? -1 : 1;
    PyObject *backend = SLOT(rec, r_backend);
    if (backend == NULL || !PyUnicode_CheckExact(backend) || PyUnicode_Compare(backend, s_cuda) != 0) {
        if (PyErr_Occurred()) PyErr_Clear();
        return 1;
    }
    PyObject *ext = glob(g_cdict, s_ext);
    if (ext == NULL)
        return PyErr_Occurred() ? -1 : 1;
    return ext != Py_None;   /* external correlation ids: the Python hook */
}

static PyObject *
hook_slow(PyObject *fn, PyObject *rec)
{
    if (fn == NULL)
        Py_RETURN_NONE;
    return PyObject_CallOneArg(fn, rec);
}

static PyObject *
hook_enter(PyObject *mod, PyObject *rec)
{
    int idle;
    int st = hook_state(rec, &idle);
    if (st != 0) {
        if (st < 0) return NULL;
        if (idle) Py_RETURN_NONE;
        return hook_slow(g_hslow_enter, rec);
    }
    PyObject *ctx = thread_ctx();
    if (ctx == NULL) {
        if (PyErr_Occurred()) return NULL;
        return hook_slow(g_hslow_enter, rec);
    }
    PyObject *node = SLOT(ctx, o_node);
    if (node != NULL && !PyLong_CheckExact(node))   /* a previous launch raised before its exit hook */
        node = SLOT(ctx, o_kprev);
    PyObject *inherit = SLOT(ctx, o_inherit);
    PyObject *fn = SLOT(rec, r_function), *ck = SLOT(rec, r_compiled), *grid = SLOT(rec, r_grid);
    PyObject *kl = NULL;
    if (node != NULL && PyLong_CheckExact(node) && fn != NULL && ck != NULL && ck != Py_None && grid != NULL
            && PyTuple_CheckExact(grid)
            && !(inherit != NULL && inherit != Py_False && PyLong_AsLong(node) == 0)) {
        /* the attribute read below may run Python: hold what was read so far */
        Py_INCREF(node); Py_INCREF(fn); Py_INCREF(ck); Py_INCREF(grid);
        PyObject *md = PyObject_GetAttr(fn, s_launch_metadata);
        if (md == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Clear();
        PyObject *klf = glob(g_hdict, s_kl_fast);
        if (!PyErr_Occurred() && (md == NULL || md == Py_None) && klf != NULL && PyDict_CheckExact(klf)) {
            /* launches without launch_metadata: the cached KernelLaunch of (id(compiled), grid, scope) */
            PyObject *id = PyLong_FromVoidPtr(ck);
            PyObject *key = id == NULL ? NULL : PyTuple_Pack(3, id, grid, node);
            Py_XDECREF(id);
            if (key != NULL) {
                kl = PyDict_GetItemWithError(klf, key);   /* borrowed */
                Py_DECREF(key);
                if (kl != NULL && Py_TYPE(kl) != g_kl_type)
                    kl = NULL;
                Py_XINCREF(kl);
            }
        }
        Py_XDECREF(md);
        Py_DECREF(fn); Py_DECREF(ck); Py_DECREF(grid);
        if (PyErr_Occurred()) { Py_XDECREF(kl); Py_DECREF(node); Py_DECREF(ctx); return NULL; }
        if (kl != NULL && SLOT(ctx, o_node) != node && SLOT(ctx, o_kprev) != node) {
            Py_DECREF(kl);   /* the thread's node moved meanwhile: let the Python hook read it again */
            kl = NULL;
        }
        Py_DECREF(node);   /* still referenced by the thread's context (checked above) */
    }
    if (kl == NULL) {   /* first launch of this kernel, grid and scope, metadata, a native thread at the root */
        Py_DECREF(ctx);
        return hook_slow(g_hslow_enter, rec);
    }
    slot_set(ctx, o_kprev, node);
    slot_set(ctx, o_node, kl);
    int rc = timeline_now(ctx, kl);
    Py_DECREF(kl);
    Py_DECREF(ctx);
    if (rc < 0)   /* never break a launch (hooks.py warns the same way) */
        PyErr_WriteUnraisable(mod);
    Py_RETURN_NONE;
}

static PyObject *
hook_exit(PyObject *mod, PyObject *rec)
{
    int idle;
    int st = hook_state(rec, &idle);
    if (st != 0) {
        if (st < 0) return NULL;
        return hook_slow(g_hslow_exit, rec);
    }
    PyObject *ctx = thread_ctx();
    if (ctx == NULL) {
        if (PyErr_Occurred()) return NULL;
        return hook_slow(g_hslow_exit, rec);
    }
    PyObject *node = SLOT(ctx, o_node);
    int rc = 0;
    if (node != NULL && Py_TYPE(node) == g_kl_type) {
        PyObject *prev = SLOT(ctx, o_kprev);
        if (prev == NULL) {
            Py_DECREF(ctx);
            return hook_slow(g_hslow_exit, rec);
        }
        Py_INCREF(prev);
        slot_set(ctx, o_node, prev);
        rc = timeline_now(ctx, prev);
        Py_DECREF(prev);
    }
    Py_DECREF(ctx);
    if (rc < 0)
        PyErr_WriteUnraisable(mod);
    Py_RETURN_NONE;
}

/* setup_hooks(hooks_module, LaunchRecord, KernelLaunch, slow_enter, slow_exit) */
static PyObject *
setup_hooks(PyObject *mod, PyObject *args)
{
    PyObject *hmod, *rt, *kt, *se, *sx;
    if (!PyArg_ParseTuple(args, "OO!O!OO:setup_hooks", &hmod, &PyType_Type, &rt, &PyType_Type, &kt, &se, &sx))
        return NULL;
    if (g_ctx_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() first");
        return NULL;
    }
    Py_ssize_t oi, rb, rf, rc_, rg;
    if (member_offset(g_ctx_type, "inherit", &oi) < 0 || member_offset((PyTypeObject *)rt, "backend", &rb) < 0
            || member_offset((PyTypeObject *)rt, "function", &rf) < 0
            || member_offset((PyTypeObject *)rt, "compiled", &rc_) < 0
            || member_offset((PyTypeObject *)rt, "grid", &rg) < 0)
        return NULL;
    PyObject *hd = PyModule_GetDict(hmod);
    if (hd == NULL) return NULL;
    o_inherit = oi; r_function = rf; r_compiled = rc_; r_grid = rg;
    Py_INCREF(hd); Py_XSETREF(g_hdict, hd);
    Py_INCREF(rt); Py_XSETREF(g_rec_type, (PyTypeObject *)rt);
    Py_INCREF(kt); Py_XSETREF(g_kl_type, (PyTypeObject *)kt);
    Py_INCREF(se); Py_XSETREF(g_hslow_enter, se);
    Py_INCREF(sx); Py_XSETREF(g_hslow_exit, sx);
    r_backend = rb;   /* last: hook_state reads it as "set up" */
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_VARARGS, "setup(context, session, slow_enter, slow_exit, decorate, repr, time_ns)"},
    {"setup_hooks", setup_hooks, METH_VARARGS, "setup_hooks(hooks, LaunchRecord, KernelLaunch, slow_enter, slow_exit)"},
    {"hook_enter", hook_enter, METH_O, "kprof's kernelc enter hook (cupti path)"},
    {"hook_exit", hook_exit, METH_O, "kprof's kernelc exit hook (cupti path)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kscope_module = {
    PyModuleDef_HEAD_INIT, "_kscope", "profiler.scope's entry and exit in C", -1, module_methods,
};

#define INTERN(var, text) do { var = PyUnicode_InternFromString(text); if (var == NULL) return NULL; } while (0)

PyMODINIT_FUNC
PyInit__kscope(void)
{
    INTERN(s_ctx, "ctx"); INTERN(s_node, "node"); INTERN(s_kprev, "kprev"); INTERN(s_stack, "stack");
    INTERN(s_times, "times"); INTERN(s_nodes, "nodes"); INTERN(s_clock, "_clock"); INTERN(s_ext, "_ext");
    INTERN(s_kids, "_kids"); INTERN(s_timing, "timing"); INTERN(s_active, "active");
    INTERN(s_python_ctx, "python_ctx"); INTERN(s_queue_metrics, "queue_metrics");
    INTERN(s_ext_changed, "_ext_changed");
    INTERN(s_metrics_q, "_metrics_q"); INTERN(s_qmax, "METRICS_Q_MAX"); INTERN(s_drain, "drain_metrics");
    INTERN(s_append, "append");
    INTERN(s_idle, "_idle"); INTERN(s_cupti, "_cupti"); INTERN(s_kl_fast, "_kl_fast");
    INTERN(s_launch_metadata, "launch_metadata"); INTERN(s_cuda, "cuda");
    g_zero = PyLong_FromLong(0);
    if (g_zero == NULL) return NULL;
    if (PyType_Ready(&ScopeType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&kscope_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ScopeType);
    if (PyModule_AddObject(m, "Scope", (PyObject *)&ScopeType) < 0) {
        Py_DECREF(&ScopeType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
