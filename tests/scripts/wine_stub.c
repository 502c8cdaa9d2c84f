/* A stand-in for uv.exe and python.exe in the installer's Wine test
 * (tests/test_installer_wine.py): the real uv.exe does not start under Wine 8
 * and no Windows CPython can be had there. It appends its exact command line
 * to %STUB_LOG% and creates only the files the real tool would create:
 *
 *   uv.exe python install ...        %UV_PYTHON_INSTALL_DIR%\cpython-...\python.exe
 *                                    (fails like a blocked download when STUB_FAIL_PYTHON is set)
 *   uv.exe venv ... DIR              DIR\Scripts\python.exe, pythonw.exe (copies of this program), DIR\pyvenv.cfg
 *   uv.exe pip install --python P .. P\..\..\Lib\site-packages\ddpstudio\__init__.py
 *   python.exe -m ddpstudio.bootstrap setup --root R ...
 *                                    exits with %STUB_BOOTSTRAP_EXIT% (default 0); on 0, R\env\ like a setup
 *   python.exe --hold FILE RELEASE [N]
 *                                    opens FILE (and FILE.1 .. FILE.N-1) without delete sharing,
 *                                    writes FILE.held, waits for RELEASE
 *
 * The role comes from this program's own file name. Build:
 *   x86_64-w64-mingw32-gcc -municode -O2 -o uv.exe wine_stub.c
 */
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>

static wchar_t self[MAX_PATH];

static void record(void) {
    wchar_t log[1024];
    if (!GetEnvironmentVariableW(L"STUB_LOG", log, 1024)) return;
    FILE *f = _wfopen(log, L"ab");
    if (!f) return;
    const wchar_t *cmd = GetCommandLineW();
    int n = WideCharToMultiByte(CP_UTF8, 0, cmd, -1, NULL, 0, NULL, NULL);
    char *utf8 = malloc(n);
    WideCharToMultiByte(CP_UTF8, 0, cmd, -1, utf8, n, NULL, NULL);
    fprintf(f, "%s\n", utf8);
    fclose(f);
    free(utf8);
}

static void make_dirs(const wchar_t *path) {
    wchar_t buf[MAX_PATH];
    wcsncpy(buf, path, MAX_PATH - 1);
    buf[MAX_PATH - 1] = 0;
    for (wchar_t *p = buf + 3; *p; p++) {
        if (*p == L'\\' || *p == L'/') {
            wchar_t c = *p;
            *p = 0;
            CreateDirectoryW(buf, NULL);
            *p = c;
        }
    }
    CreateDirectoryW(buf, NULL);
}

static void write_file(const wchar_t *dir, const wchar_t *name, const char *text) {
    wchar_t path[MAX_PATH];
    make_dirs(dir);
    swprintf(path, MAX_PATH, L"%ls\\%ls", dir, name);
    FILE *f = _wfopen(path, L"wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void copy_self(const wchar_t *dir, const wchar_t *name) {
    wchar_t path[MAX_PATH];
    make_dirs(dir);
    swprintf(path, MAX_PATH, L"%ls\\%ls", dir, name);
    CopyFileW(self, path, FALSE);
}

static const wchar_t *option(int argc, wchar_t **argv, const wchar_t *name) {
    for (int i = 1; i + 1 < argc; i++)
        if (!wcscmp(argv[i], name)) return argv[i + 1];
    return NULL;
}

static int as_uv(int argc, wchar_t **argv) {
    wchar_t dir[MAX_PATH];
    if (argc > 1 && !wcscmp(argv[1], L"--version")) {
        puts("uv 0.13.9 (stand-in)");
        return 0;
    }
    if (argc > 2 && !wcscmp(argv[1], L"python") && !wcscmp(argv[2], L"install")) {
        if (GetEnvironmentVariableW(L"STUB_FAIL_PYTHON", dir, MAX_PATH)) {
            fputs("error: Failed to download https://releases.astral.sh/github/python-build-standalone/...\n"
                  "  Caused by: tcp connect error: A connection attempt failed (os error 10060)\n", stderr);
            return 2;
        }
        if (!GetEnvironmentVariableW(L"UV_PYTHON_INSTALL_DIR", dir, MAX_PATH)) return 3;
        wcscat(dir, L"\\cpython-3.11-windows-x86_64-none");
        copy_self(dir, L"python.exe");
        return 0;
    }
    if (argc > 2 && !wcscmp(argv[1], L"venv")) {
        const wchar_t *venv = argv[argc - 1];
        swprintf(dir, MAX_PATH, L"%ls\\Scripts", venv);
        copy_self(dir, L"python.exe");
        copy_self(dir, L"pythonw.exe");
        write_file((wchar_t *)venv, L"pyvenv.cfg", "home = stand-in\n");
        return 0;
    }
    if (argc > 2 && !wcscmp(argv[1], L"pip") && !wcscmp(argv[2], L"install")) {
        const wchar_t *python = option(argc, argv, L"--python");
        if (!python) return 2;
        swprintf(dir, MAX_PATH, L"%ls\\..\\..\\Lib\\site-packages\\ddpstudio", python);
        write_file(dir, L"__init__.py", "");
        return 0;
    }
    return 0;
}

static int hold(const wchar_t *file, const wchar_t *release, int count) {
    wchar_t marker[MAX_PATH], path[MAX_PATH];
    HANDLE handles[256];
    if (count < 1 || count > 256) return 2;
    for (int i = 0; i < count; i++) {
        if (i == 0) wcsncpy(path, file, MAX_PATH - 1), path[MAX_PATH - 1] = 0;
        else swprintf(path, MAX_PATH, L"%ls.%d", file, i);
        /* No FILE_SHARE_DELETE: deleting or renaming it fails while we run, as with a training run's open file. */
        handles[i] = CreateFileW(path, GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ, NULL, OPEN_ALWAYS, 0, NULL);
        if (handles[i] == INVALID_HANDLE_VALUE) return 5;
    }
    swprintf(marker, MAX_PATH, L"%ls.held", file);
    FILE *f = _wfopen(marker, L"wb");
    if (f) fclose(f);
    for (int i = 0; i < 1200 && GetFileAttributesW(release) == INVALID_FILE_ATTRIBUTES; i++) Sleep(100);
    for (int i = 0; i < count; i++) CloseHandle(handles[i]);
    return 0;
}

static int as_python(int argc, wchar_t **argv) {
    wchar_t dir[MAX_PATH], code[16];
    if (argc > 3 && !wcscmp(argv[1], L"--hold")) return hold(argv[2], argv[3], argc > 4 ? _wtoi(argv[4]) : 1);
    if (argc > 3 && !wcscmp(argv[1], L"-m") && !wcscmp(argv[2], L"ddpstudio.bootstrap") && !wcscmp(argv[3], L"setup")) {
        int exit_code = GetEnvironmentVariableW(L"STUB_BOOTSTRAP_EXIT", code, 16) ? _wtoi(code) : 0;
        const wchar_t *root = option(argc, argv, L"--root");
        if (exit_code == 0 && root) {
            swprintf(dir, MAX_PATH, L"%ls\\env\\Scripts", root);
            copy_self(dir, L"python.exe");
            swprintf(dir, MAX_PATH, L"%ls\\env", root);
            write_file(dir, L"ddpstudio-environment.json", "{\"build\": \"cpu\"}\n");
        }
        return exit_code;
    }
    return 0;
}

int wmain(int argc, wchar_t **argv) {
    GetModuleFileNameW(NULL, self, MAX_PATH);
    record();
    const wchar_t *name = wcsrchr(self, L'\\');
    name = name ? name + 1 : self;
    if (!_wcsicmp(name, L"uv.exe")) return as_uv(argc, argv);
    return as_python(argc, argv);
}
