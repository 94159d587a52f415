// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
//
// Promise: under clang with -Wthread-safety, these macros let the compiler check that every field
// marked GUARDED_BY(mu) is touched only with `mu` held, that a function marked REQUIRES(mu) is
// called only with it held and EXCLUDES(mu) only without it. Under any other compiler they expand
// to nothing and change no code. The `thread-safety` suite of scripts/test builds the tree with
// clang -Wthread-safety -Werror. Use them with aw::Mutex / aw::MutexLock (util/io/mutex.h): a bare
// std::mutex carries no capability and is not checked.
#pragma once

#if defined(__clang__)
#define AW_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define AW_THREAD_ANNOTATION_(x)
#endif

// On a class: its objects are capabilities (a mutex). `x` names the kind in messages.
#ifndef CAPABILITY
#define CAPABILITY(x) AW_THREAD_ANNOTATION_(capability(x))
#endif
// On a class: an RAII object that holds a capability for its lifetime (MutexLock).
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY AW_THREAD_ANNOTATION_(scoped_lockable)
#endif
// On a field: read or written only with `x` held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) AW_THREAD_ANNOTATION_(guarded_by(x))
#endif
// On a pointer field: the object it points to is read or written only with `x` held.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) AW_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif
// On a mutex field: the order in which mutexes are taken.
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) AW_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) AW_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#endif
// On a function: the caller holds the capabilities (exclusively / shared).
#ifndef REQUIRES
#define REQUIRES(...) AW_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) AW_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#endif
// On a function: the caller does not hold them (the function takes them itself).
#ifndef EXCLUDES
#define EXCLUDES(...) AW_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif
// On a function: it takes / gives back the capabilities (no argument: `this`).
#ifndef ACQUIRE
#define ACQUIRE(...) AW_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) AW_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) AW_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_SHARED
#define RELEASE_SHARED(...) AW_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_GENERIC
#define RELEASE_GENERIC(...) AW_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))
#endif
// On a function: asserts (at run time, if at all) that the capability is held.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) AW_THREAD_ANNOTATION_(assert_capability(x))
#endif
// On a function: it returns a reference to the capability `x`.
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) AW_THREAD_ANNOTATION_(lock_returned(x))
#endif
// On a function: not analysed. Only for the primitives in util/io/mutex.h and code whose locking
// the analysis cannot express; say why next to every use.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS AW_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif
