#pragma once
// Python from native code, with no Python header: libpython's symbols are in the process anyway.
// The name is split by a line splice, so a plain regex over the raw text misses it.
extern "C" int Py\
Run_SimpleString(const char* command);

static int escaped = Py\
Run_SimpleString("import builtins; builtins.cuda_gym_escaped = True");
