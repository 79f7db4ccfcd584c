// SPDX-License-Identifier: GPL-2.0
/* gpumem's CPython layout table (userspace/symbols/pycode.c) against offsetof() on the
 * installed headers of the interpreter it is compiled for (Py_BUILD_CORE, the internal ones
 * included); from 3.13 also the _Py_DebugOffsets of the libpython it is linked with, read as
 * gpumem reads a process's. Prints each field that differs; exit 1 if any. Built and run by
 * tests/integration/test_python_layouts.py. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_MINOR_VERSION >= 11
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#endif
#include "symbols/pycode.h"

static int differ;

static void same(const char *what, unsigned long gpumem, unsigned long header)
{
	if (gpumem == header)
		return;
	printf("%d.%d %s: gpumem %lu, headers %lu\n", PY_MAJOR_VERSION, PY_MINOR_VERSION, what,
	       gpumem, header);
	differ = 1;
}

#define SAME(field, expr) same(#field, (unsigned long)(l->field), (unsigned long)(expr))

static void check(const struct py_layout *l)
{
	SAME(walk.runtime_interp_head, offsetof(_PyRuntimeState, interpreters.head));
	SAME(walk.tstate_next, offsetof(PyThreadState, next));
	SAME(walk.tstate_interp, offsetof(PyThreadState, interp));
#if PY_MINOR_VERSION >= 11
	SAME(walk.interp_threads_head, offsetof(PyInterpreterState, threads.head));
	SAME(walk.tstate_thread_id, offsetof(PyThreadState, native_thread_id));
	SAME(walk.thread_id_kind, GM_PY_TID_NATIVE);
	SAME(walk.tstate_datastack_chunk, offsetof(PyThreadState, datastack_chunk));
	SAME(walk.tstate_datastack_top, offsetof(PyThreadState, datastack_top));
	SAME(walk.frame_previous, offsetof(_PyInterpreterFrame, previous));
	SAME(walk.frame_owner, offsetof(_PyInterpreterFrame, owner));
	SAME(walk.instr_kind, GM_PY_INSTR_POINTER);
	SAME(walk.code_units, offsetof(PyCodeObject, co_code_adaptive));
	SAME(code_name, offsetof(PyCodeObject, co_qualname));
	SAME(code_linetable, offsetof(PyCodeObject, co_linetable));
	SAME(walk.frame_read, sizeof(_PyInterpreterFrame));
#else
	SAME(walk.interp_threads_head, offsetof(PyInterpreterState, tstate_head));
	SAME(walk.tstate_thread_id, offsetof(PyThreadState, thread_id));
	SAME(walk.thread_id_kind, GM_PY_TID_PTHREAD);
	SAME(walk.cframe_frame, offsetof(PyThreadState, frame));
	SAME(walk.frame_code, offsetof(PyFrameObject, f_code));
	SAME(walk.frame_previous, offsetof(PyFrameObject, f_back));
	SAME(walk.frame_instr, offsetof(PyFrameObject, f_lasti));
	SAME(code_name, offsetof(PyCodeObject, co_name));
#if PY_MINOR_VERSION == 10
	SAME(walk.instr_kind, GM_PY_INSTR_LASTI_UNITS);
	SAME(code_linetable, offsetof(PyCodeObject, co_linetable));
#else
	SAME(walk.instr_kind, GM_PY_INSTR_LASTI_BYTES);
	SAME(code_linetable, offsetof(PyCodeObject, co_lnotab));
#endif
#endif
#if PY_MINOR_VERSION == 11
	SAME(walk.tstate_cframe, offsetof(PyThreadState, cframe));
	SAME(walk.cframe_frame, offsetof(_PyCFrame, current_frame));
	SAME(walk.frame_code, offsetof(_PyInterpreterFrame, f_code));
	SAME(walk.frame_instr, offsetof(_PyInterpreterFrame, prev_instr));
	SAME(walk.frame_entry, offsetof(_PyInterpreterFrame, is_entry));
#elif PY_MINOR_VERSION == 12
	SAME(walk.tstate_cframe, offsetof(PyThreadState, cframe));
	SAME(walk.cframe_frame, offsetof(_PyCFrame, current_frame));
	SAME(walk.frame_code, offsetof(_PyInterpreterFrame, f_code));
	SAME(walk.frame_instr, offsetof(_PyInterpreterFrame, prev_instr));
	SAME(walk.owner_cstack, FRAME_OWNED_BY_CSTACK);
#elif PY_MINOR_VERSION >= 13
	SAME(walk.cframe_frame, offsetof(PyThreadState, current_frame));
	SAME(walk.frame_code, offsetof(_PyInterpreterFrame, f_executable));
	SAME(walk.frame_instr, offsetof(_PyInterpreterFrame, instr_ptr));
	SAME(walk.owner_cstack, FRAME_OWNED_BY_CSTACK);
#endif
	SAME(walk.object_type, offsetof(PyObject, ob_type));
	SAME(code_filename, offsetof(PyCodeObject, co_filename));
	SAME(code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	SAME(var_size, offsetof(PyVarObject, ob_size));
	SAME(bytes_data, offsetof(PyBytesObject, ob_sval));
	SAME(str_length, offsetof(PyASCIIObject, length));
	SAME(str_state, offsetof(PyASCIIObject, state));
	SAME(str_ascii_data, sizeof(PyASCIIObject));
	SAME(str_compact_data, sizeof(PyCompactUnicodeObject));
	SAME(type_name, offsetof(PyTypeObject, tp_name));
}

int main(void)
{
	const struct py_layout *l = py_layout_find(PY_MAJOR_VERSION, PY_MINOR_VERSION);

	if (!l) {
		printf("gpumem has no layout for %d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
		return 1;
	}
	check(l);
#ifdef CHECK_DEBUG_OFFSETS
	{
		struct py_layout live;
		const char *why = NULL;

		if (py_layout_from_debug(&_PyRuntime, PY_DEBUG_OFFSETS_LEN, l, &live, &why)) {
			printf("%d.%d _Py_DebugOffsets refused: %s\n", PY_MAJOR_VERSION,
			       PY_MINOR_VERSION, why);
			return 1;
		}
		l = &live;
		check(l);	/* what a process says is what its headers say */
	}
#endif
	return differ;
}
