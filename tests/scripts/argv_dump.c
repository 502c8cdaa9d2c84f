/* How Windows itself splits command lines: tests/test_cmdline_wine.py runs this under Wine.
 *
 * Reads lines from stdin (UTF-8), each "A <arguments>" or "K <cmd.exe line>", and answers per line:
 *   A: "S" + CommandLineToArgvW("x <arguments>"), then "C" + the C runtime's argv of a child
 *      started by CreateProcessW with exactly the command line "x <arguments>";
 *   K: "C" + the C runtime's argv of this program run by "cmd.exe /d /c <this program> <line>".
 * Each argument after argv[0] is written as hex UTF-16 code units ending in ".", tab-separated.
 * The child is this program again, told so by ARGV_DUMP_CHILD in its environment. */
#include <windows.h>
#include <shellapi.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#define LINE_MAX_CHARS 32000

static void dump(const char *tag, int argc, wchar_t **argv) {
    printf("%s", tag);
    for (int i = 1; i < argc; i++) {
        printf("\t");
        for (const wchar_t *p = argv[i]; *p; p++) printf("%04x", (unsigned)*p);
        printf(".");
    }
    printf("\n");
    fflush(stdout);
}

static void run_child(const wchar_t *app, wchar_t *command_line) {
    STARTUPINFOW si;
    PROCESS_INFORMATION pi;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    /* Under Wine a start among the hundreds this program makes has failed once with
     * ERROR_INTERNAL_ERROR (1359; CI-like run, load 3): what is tested is how the child splits its
     * line, so a failed start is tried again, and "E" is the answer only when it keeps failing. */
    BOOL started = FALSE;
    DWORD error = 0;
    for (int attempt = 0; attempt < 5 && !started; attempt++) {
        if (attempt) Sleep(200);
        started = CreateProcessW(app, command_line, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi);
        if (!started) error = GetLastError();
    }
    if (!started) {
        printf("E\t%lu\n", error);
        fflush(stdout);
        return;
    }
    WaitForSingleObject(pi.hProcess, INFINITE);
    CloseHandle(pi.hProcess);
    CloseHandle(pi.hThread);
}

int wmain(int argc, wchar_t **argv) {
    static char line[LINE_MAX_CHARS];
    static wchar_t text[LINE_MAX_CHARS], command[2 * LINE_MAX_CHARS];
    wchar_t self[MAX_PATH];
    const wchar_t *child = _wgetenv(L"ARGV_DUMP_CHILD");
    if (child && *child) {
        dump("C", argc, argv);
        return 0;
    }
    GetModuleFileNameW(NULL, self, MAX_PATH);
    SetEnvironmentVariableW(L"ARGV_DUMP_CHILD", L"1");
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n < 2) continue;
        MultiByteToWideChar(CP_UTF8, 0, line + 2, -1, text, LINE_MAX_CHARS);
        if (line[0] == 'A') {
            int count = 0;
            swprintf(command, 2 * LINE_MAX_CHARS, L"x %ls", text);
            wchar_t **parts = CommandLineToArgvW(command, &count);
            dump("S", count, parts);
            LocalFree(parts);
            run_child(self, command);
        } else if (line[0] == 'K') {
            swprintf(command, 2 * LINE_MAX_CHARS, L"cmd.exe /d /c %ls %ls", self, text);
            run_child(NULL, command);
        }
    }
    return 0;
}
