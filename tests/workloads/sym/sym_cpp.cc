// SPDX-License-Identifier: GPL-2.0
/* Symbolization workload in C++: a static method and a function template down to cudaMalloc,
 * whose frames must show demangled names. LINE:name markers as in sym_levels.c. */
#include <cstddef>
#include <cstdio>

extern "C" int cudaMalloc(void **ptr, size_t size);

#define SYM_FRAME __attribute__((noipa))

namespace gmsym {

struct Pool {
	SYM_FRAME static void *grab(unsigned long size);
};

void *Pool::grab(unsigned long size)
{
	void *p = nullptr;

	if (cudaMalloc(&p, size) != 0) /* LINE:Pool::grab */
		return nullptr;
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

template <typename T> SYM_FRAME T *make_array(unsigned long n)
{
	void *p = Pool::grab(n * sizeof(T)); /* LINE:make_array */

	__asm__ volatile("" : : "r"(p) : "memory");
	return static_cast<T *>(p);
}

} // namespace gmsym

int main()
{
	double *a = gmsym::make_array<double>(4096); /* LINE:main_cpp */

	std::printf("allocated %p\n", static_cast<void *>(a));
	return a ? 0 : 1;
}
