package sandbox

import (
	"reflect"
	"sync/atomic"
	"unsafe"

	lib "modernc.org/libquickjs"
	"modernc.org/quickjs"
)

// Why a terminated run needs more than quickjs.VM.Interrupt.
//
// VM.Interrupt only sets a flag. QuickJS reads that flag in its interrupt handler, and calls
// the handler only when a per-context countdown (JSContext.interrupt_counter, reset to
// JS_INTERRUPT_COUNTER_INIT = 10000) reaches zero; the countdown moves by one at each function
// entry and backward jump. So a run stops only after up to 10000 more of those, and nothing
// bounds the work between two of them. Two kinds of code make that work huge:
//
//   - Recursion that catches its own stack overflow (f = n => { try { return f(n+1) } catch
//     { return f(n+1) } }): every overflow builds an error whose stack lists all ~5000
//     frames, so 10000 steps cost about 8 s (a CPU profile of the attack is 98% in
//     build_backtrace). A lower stack limit only divides that, it does not bound it.
//   - Loops around builtins over large data (for (;;) a.indexOf(x) on 2e6 elements): each
//     call is one step, 10000 calls took 107 s.
//
// Setting the countdown to zero after setting the flag makes the handler run at the very next
// function entry or backward jump, which the engine reaches quickly whatever the code does, so
// the run ends within one step. The countdown is the engine's own mechanism, not a new check on
// the hot path: a run that is never terminated costs nothing more.
//
// The countdown does not reach a builtin that is already running: a single call such as
// JSON.stringify of a large sparse array, or a join or a walk over one, loops inside the engine
// and checks for an interrupt only when it returns (up to 0.7 s at 64 MiB). Most of those loops
// allocate as they go (the string they build grows), so a terminated run also gets a memory
// limit of zero: the builtin's next allocation fails, it throws, and the countdown ends the run.
// What remains is a builtin that allocates nothing while it loops; Handle answers the caller at
// the deadline regardless (see stopGrace) and keeps the run's resources counted until the
// interpreter stops.
//
// quickjs.VM keeps its JSContext and JSRuntime pointers in unexported fields, read once per run
// by reflection; TestDeadlineInterruptReachesTheEngine fails if a new version of
// modernc.org/quickjs renames them, rather than letting the sandbox fall back silently to the
// weak interrupt.

// interruptCountdown returns the address of vm's interrupt countdown, or nil when this version
// of modernc.org/quickjs does not expose it the way the sandbox expects. vm must be open; the
// address is valid until vm closes.
func interruptCountdown(vm *quickjs.VM) *int32 {
	f := reflect.ValueOf(vm).Elem().FieldByName("cContext")
	if !f.IsValid() || f.Kind() != reflect.Uintptr || f.Uint() == 0 {
		return nil
	}
	ctx := uintptr(f.Uint())
	// The context is C memory (modernc.org/libc), outside the Go heap: the garbage collector
	// neither moves nor frees it, so holding its address is safe until vm.Close.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&ctx))
	return &(*lib.TJSContext)(p).Finterrupt_counter
}

// memoryLimitOf returns the address of the memory limit of vm's runtime, or nil when this
// version of modernc.org/quickjs does not expose it the way the sandbox expects. vm must be
// open; the address is valid until vm closes.
func memoryLimitOf(vm *quickjs.VM) *uintptr {
	rt := reflect.ValueOf(vm).Elem().FieldByName("runtime")
	if !rt.IsValid() || rt.Kind() != reflect.Pointer || rt.IsNil() {
		return nil
	}
	f := rt.Elem().FieldByName("cRuntime")
	if !f.IsValid() || f.Kind() != reflect.Uintptr || f.Uint() == 0 {
		return nil
	}
	r := uintptr(f.Uint())
	p := *(*unsafe.Pointer)(unsafe.Pointer(&r)) // C memory, as in interruptCountdown
	// size_t, which is as wide as a pointer on every platform libquickjs supports.
	return (*uintptr)(unsafe.Pointer(&(*lib.TJSRuntime)(p).Fmalloc_ctx.Fmalloc_state.Fmalloc_limit))
}

// memoryUsed returns how many bytes vm's runtime has allocated, 0 when this version of
// modernc.org/quickjs does not expose it the way the sandbox expects. It must be called on
// the goroutine running vm (a host function's), which alone changes the count.
func memoryUsed(vm *quickjs.VM) int64 {
	rt := reflect.ValueOf(vm).Elem().FieldByName("runtime")
	if !rt.IsValid() || rt.Kind() != reflect.Pointer || rt.IsNil() {
		return 0
	}
	f := rt.Elem().FieldByName("cRuntime")
	if !f.IsValid() || f.Kind() != reflect.Uintptr || f.Uint() == 0 {
		return 0
	}
	r := uintptr(f.Uint())
	p := *(*unsafe.Pointer)(unsafe.Pointer(&r)) // C memory, as in interruptCountdown
	return int64((*lib.TJSRuntime)(p).Fmalloc_ctx.Fmalloc_state.Fmalloc_size)
}

// starve makes every allocation the engine asks for from now on fail, which ends a builtin that
// is building something; freeing still works, so the run unwinds and closes normally.
func starve(limit *uintptr) {
	atomic.StoreUintptr(limit, 0)
}

// pollNow makes the engine call its interrupt handler at its next function entry or backward
// jump. The engine's own decrement is not atomic: a store that lands between its load and its
// store is lost, which is why the caller repeats it until the run ends.
func pollNow(countdown *int32) {
	atomic.StoreInt32(countdown, 0)
}

// maxLength is the most values a run's memory could hold (each takes a JSValue in an array).
// The prelude refuses to let a builtin walk an array-like longer than that: it can only be
// holes, which cost the walk time but no memory, and no interrupt reaches a walk in progress.
func maxLength(memoryLimit int64) int64 {
	return memoryLimit / int64(unsafe.Sizeof(lib.TJSValue{}))
}

// sortAlone is the longest array the prelude lets the engine sort without a comparator. A
// builtin sort compares inside the engine, out of the interrupt's reach; past this length the
// prelude passes a comparator that orders as the builtin does, so that a timeout or a
// termination reaches every comparison. A variable, not a constant, so that tests can check
// that comparator on arrays small enough to sort quickly under the race detector.
var sortAlone int64 = 1 << 16
