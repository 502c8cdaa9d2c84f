/* A stand-in rstrtmgr.dll for the installer's Wine test (tests/test_installer_wine.py).
 * Wine 8's own rstrtmgr.dll is a stub: every call succeeds and RmGetList always
 * answers "no process" (docs/install.md shows the probe), so under Wine the
 * uninstaller's Restart Manager path could never name anyone. This one answers as
 * Windows documents it, for the holders listed in %STUB_RM_HOLDERS%
 * ("Name=pid;Name=pid"): RmGetList returns ERROR_MORE_DATA and the count needed
 * while the caller's array is too small, then fills RM_PROCESS_INFO (restartmanager.h's
 * layout). Each call, and each registered file, is appended to %STUB_LOG%.
 * Build: x86_64-w64-mingw32-gcc -shared -municode -O2 -o rstrtmgr.dll rstrtmgr_standin.c
 */
#include <windows.h>
#include <restartmanager.h>
#include <stdio.h>
#include <wchar.h>

static void note(const wchar_t *line) {
    wchar_t log[1024];
    char utf8[2048];
    if (!GetEnvironmentVariableW(L"STUB_LOG", log, 1024)) return;
    FILE *f = _wfopen(log, L"ab");
    if (!f) return;
    WideCharToMultiByte(CP_UTF8, 0, line, -1, utf8, sizeof utf8, NULL, NULL);
    fprintf(f, "%s\n", utf8);
    fclose(f);
}

static UINT holders(RM_PROCESS_INFO *out, UINT room) {
    wchar_t spec[1024], *ctx = NULL;
    UINT n = 0;
    if (!GetEnvironmentVariableW(L"STUB_RM_HOLDERS", spec, 1024)) return 0;
    for (wchar_t *item = wcstok_s(spec, L";", &ctx); item; item = wcstok_s(NULL, L";", &ctx), n++) {
        wchar_t *eq = wcschr(item, L'=');
        if (!eq || !out || n >= room) continue;
        *eq = 0;
        ZeroMemory(&out[n], sizeof out[n]);
        out[n].Process.dwProcessId = (DWORD)_wtoi(eq + 1);
        lstrcpynW(out[n].strAppName, item, CCH_RM_MAX_APP_NAME + 1);
        out[n].ApplicationType = RmMainWindow;
        out[n].TSSessionId = 1;
    }
    return n;
}

DWORD WINAPI RmStartSession(DWORD *session, DWORD flags, WCHAR key[]) {
    (void)flags;
    *session = 7;
    lstrcpyW(key, L"0123456789abcdef0123456789abcdef");
    note(L"RmStartSession");
    return ERROR_SUCCESS;
}

DWORD WINAPI RmRegisterResources(DWORD session, UINT nfiles, LPCWSTR files[], UINT napps, RM_UNIQUE_PROCESS apps[],
                                 UINT nservices, LPCWSTR services[]) {
    wchar_t line[1100];
    (void)apps, (void)services;
    swprintf(line, 1100, L"RmRegisterResources session %lu: %u files, %u apps, %u services", session, nfiles, napps,
             nservices);
    note(line);
    for (UINT i = 0; i < nfiles; i++) {
        swprintf(line, 1100, L"  %ls", files[i]);
        note(line);
    }
    return ERROR_SUCCESS;
}

DWORD WINAPI RmGetList(DWORD session, UINT *needed, UINT *count, RM_PROCESS_INFO apps[], DWORD *reasons) {
    wchar_t line[200];
    UINT room = *count, n = holders(NULL, 0);
    *needed = n;
    *reasons = RmRebootReasonNone;
    swprintf(line, 200, L"RmGetList session %lu: room for %u, %u holders", session, room, n);
    note(line);
    if (room < n) return ERROR_MORE_DATA;
    *count = holders(apps, room);
    return ERROR_SUCCESS;
}

DWORD WINAPI RmEndSession(DWORD session) {
    wchar_t line[64];
    swprintf(line, 64, L"RmEndSession session %lu", session);
    note(line);
    return ERROR_SUCCESS;
}
