// Test-only: Wine 8 has no bcryptprimitives.dll, whose ProcessPrng Rust's std on Windows
// imports for its random numbers (Windows 10 and later have it). This stand-in, built
// with mingw-w64 by js-tests/cross.test.mjs and found through WINEPATH, fills the buffer
// from RtlGenRandom (advapi32's SystemFunction036), as ProcessPrng's documentation says
// it may. It is never shipped.
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
    if (!SystemFunction036(data, chunk)) return FALSE;
    data += chunk;
    length -= chunk;
  }
  return TRUE;
}
