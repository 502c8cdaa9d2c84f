; DDP Studio: per-user Windows installer (no administrator rights).
;
; Built by installer/build.py, which passes:
;   VERSION         the app's version (ddpstudio.__version__), e.g. 0.1.0
;   VERSION_QUAD    the same as four numbers for the file's version resource
;   APP_WHEEL       the app wheel's file name
;   PYTHON_VERSION  the Python the bootstrap asks uv for (ddpstudio.bootstrap.pins)
;   STAGE           a folder holding uv.exe, ddpstudio.ico, finish-setup.cmd and wheels\APP_WHEEL
;   OUTFILE         where to write DDPStudio-Setup-VERSION.exe
;   TARGET          NSIS target (default amd64-unicode; the Windows NSIS package
;                   ships only the x86 stubs, so Windows builds pass x86-unicode,
;                   which installs this 64-bit software just as well)
;
; What it does: copies uv.exe, the icon and the wheel into
; $LOCALAPPDATA\Programs\DDPStudio, lets uv fetch Python into that folder,
; makes a tiny "bootstrap" venv holding only the app wheel, and runs
; `python -m ddpstudio.bootstrap setup`, which chooses the PyTorch build
; for the NVIDIA driver and builds the app's environment (its own progress
; window; with /S it runs headless and its exit code becomes ours).
; Shortcuts start `pythonw -m ddpstudio.bootstrap launch`, which opens the
; app, or finishes the setup first if it did not complete here.
;
; Nothing can leave a half install without a way on: before the first step
; that can fail (the Python download) the uninstall entry and "Finish
; setting up DDP Studio" shortcuts (finish-setup.cmd: the same uv steps, then
; the launcher) exist; the "DDP Studio" shortcuts replace them once the
; launcher's Python exists. The uninstaller keeps its entry and itself until
; the files are really gone, and names the programs that hold them.
;
; Silent install: DDPStudio-Setup-X.exe /S  (exit code 0 = set up and verified)
; Silent uninstall: Uninstall.exe /S [/REMOVEDATA]

!macro Require NAME
  !ifndef ${NAME}
    !error "${NAME} is not defined: build with installer/build.py"
  !endif
!macroend
!insertmacro Require VERSION
!insertmacro Require VERSION_QUAD
!insertmacro Require APP_WHEEL
!insertmacro Require PYTHON_VERSION
!insertmacro Require STAGE
!insertmacro Require OUTFILE

!ifndef TARGET
  !define TARGET amd64-unicode ; uv.exe and PyTorch's Windows wheels are x64 only
!endif
Unicode true
ManifestDPIAware true
Target ${TARGET}
!ifdef NO_COMPRESS
  SetCompress off ; tests only (build.py --no-compress): the same installer, larger, built in seconds
!else
  SetCompressor /SOLID lzma
!endif
RequestExecutionLevel user

Var HoldersFoundBy ; the uninstaller's: how un.Holders named the holders
Var RmFiles
Var RmCount

!define APP_NAME "DDP Studio"
!define APP_ID "DDPStudio"
!define PUBLISHER "DDP Studio"
!define UNINSTALL_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\${APP_ID}"
; Run history, settings and logs (ddpstudio.core.paths: platformdirs' per-user data folder).
!define DATA_DIR "$LOCALAPPDATA\DDPStudio"
!define MENU_DIR "$SMPROGRAMS\${APP_NAME}"
!define LAUNCHER "$INSTDIR\bootstrap\Scripts\pythonw.exe"
!define BOOTSTRAP_PYTHON "$INSTDIR\bootstrap\Scripts\python.exe"
!define FINISH_NAME "Finish setting up ${APP_NAME}"
!define FINISH_CMD "$INSTDIR\finish-setup.cmd"
; Every host setup downloads from (ddpstudio.bootstrap.network.HOSTS; a test keeps them equal).
!define HOSTS_PYTHON "releases.astral.sh and github.com"
!define HOSTS_PACKAGES "pypi.org, files.pythonhosted.org and download.pytorch.org"
!define NETWORK_HELP "At work, the proxy or firewall must allow ${HOSTS_PYTHON} (Python) and ${HOSTS_PACKAGES} (packages). Setup uses the proxy in HTTPS_PROXY, the Windows certificate store when UV_SYSTEM_CERTS=true is set (proxies that inspect HTTPS), and a Python download mirror from UV_PYTHON_INSTALL_MIRROR."

Name "${APP_NAME} ${VERSION}"
OutFile "${OUTFILE}"
InstallDir "$LOCALAPPDATA\Programs\${APP_ID}"
InstallDirRegKey HKCU "${UNINSTALL_KEY}" "InstallLocation"
BrandingText "${APP_NAME} ${VERSION}"
ShowInstDetails show
ShowUninstDetails show

VIProductVersion "${VERSION_QUAD}"
VIAddVersionKey "ProductName" "${APP_NAME}"
VIAddVersionKey "ProductVersion" "${VERSION}"
VIAddVersionKey "FileVersion" "${VERSION}"
VIAddVersionKey "FileDescription" "${APP_NAME} setup"
VIAddVersionKey "CompanyName" "${PUBLISHER}"
VIAddVersionKey "LegalCopyright" "BSD-3-Clause"

!include "MUI2.nsh"
!include "LogicLib.nsh"
!include "FileFunc.nsh"
!include "Sections.nsh"

!define MUI_ICON "${STAGE}\ddpstudio.ico"
!define MUI_UNICON "${STAGE}\ddpstudio.ico"
!define MUI_WELCOMEFINISHPAGE_BITMAP "${STAGE}\installer-welcome.bmp"
!define MUI_UNWELCOMEFINISHPAGE_BITMAP "${STAGE}\installer-welcome.bmp"
!define MUI_ABORTWARNING
!define MUI_WELCOMEPAGE_TITLE "Install ${APP_NAME} ${VERSION}"
!define MUI_WELCOMEPAGE_TEXT "${APP_NAME} trains PyTorch models on all the GPUs of this computer.$\r$\n$\r$\nSetup installs it for you only: no administrator rights are needed.$\r$\n$\r$\nAt the end, Setup downloads Python and PyTorch (a few GB, once) and picks the PyTorch build that fits your NVIDIA driver. A window shows the progress. Keep the computer connected to the internet.$\r$\n$\r$\nClick Next to continue."
!define MUI_COMPONENTSPAGE_NODESC
!define MUI_FINISHPAGE_RUN
!define MUI_FINISHPAGE_RUN_TEXT "Start ${APP_NAME}"
!define MUI_FINISHPAGE_RUN_FUNCTION StartApp

!insertmacro MUI_PAGE_WELCOME
!insertmacro MUI_PAGE_COMPONENTS
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH

!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES

!insertmacro MUI_LANGUAGE "English"

; uv keeps its Pythons and its cache inside the installation, so the
; uninstaller removes them (and nothing of the user's own uv is touched).
!macro UseOwnUvFolders
  System::Call 'Kernel32::SetEnvironmentVariable(t "UV_PYTHON_INSTALL_DIR", t "$INSTDIR\python")i'
  System::Call 'Kernel32::SetEnvironmentVariable(t "UV_CACHE_DIR", t "$INSTDIR\cache")i'
  System::Call 'Kernel32::SetEnvironmentVariable(t "VIRTUAL_ENV", n)i'
!macroend

Section "${APP_NAME} (required)" SecApp
  SectionIn RO
  SetOutPath "$INSTDIR"
  File "${STAGE}\uv.exe"
  File "${STAGE}\ddpstudio.ico"
  File "${STAGE}\finish-setup.cmd"
  ; An upgrade replaces the wheel; the bootstrap installs the newest one.
  Delete "$INSTDIR\wheels\ddpstudio-*.whl"
  SetOutPath "$INSTDIR\wheels"
  File "${STAGE}\wheels\${APP_WHEEL}"
  SetOutPath "$INSTDIR"

  WriteUninstaller "$INSTDIR\Uninstall.exe"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayName" "${APP_NAME}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "Publisher" "${PUBLISHER}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayIcon" "$INSTDIR\ddpstudio.ico"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "UninstallString" '"$INSTDIR\Uninstall.exe"'
  WriteRegStr HKCU "${UNINSTALL_KEY}" "QuietUninstallString" '"$INSTDIR\Uninstall.exe" /S'
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoRepair" 1

  ; Before anything can fail: a way to finish the setup later.
  CreateDirectory "${MENU_DIR}"
  CreateShortCut "${MENU_DIR}\${FINISH_NAME}.lnk" "${FINISH_CMD}" "" "$INSTDIR\ddpstudio.ico" 0 SW_SHOWNORMAL "" "Download Python and finish installing ${APP_NAME}"
  CreateShortCut "${MENU_DIR}\Uninstall ${APP_NAME}.lnk" "$INSTDIR\Uninstall.exe"
  Call FinishShortcutOnDesktop

  !insertmacro UseOwnUvFolders
  Call PrepareBootstrapPython

  ; The launcher exists from now on (see the header): the real shortcuts replace the "finish" ones.
  CreateShortCut "${MENU_DIR}\${APP_NAME}.lnk" "${LAUNCHER}" '-m ddpstudio.bootstrap launch --root "$INSTDIR"' "$INSTDIR\ddpstudio.ico" 0 SW_SHOWNORMAL "" "Train PyTorch models on all your GPUs"
  CreateShortCut "${MENU_DIR}\Repair ${APP_NAME}.lnk" "${LAUNCHER}" '-m ddpstudio.bootstrap repair --root "$INSTDIR"' "$INSTDIR\ddpstudio.ico" 0 SW_SHOWNORMAL "" "Install PyTorch and ${APP_NAME} again"
  Delete "${MENU_DIR}\${FINISH_NAME}.lnk"
SectionEnd

Section "Desktop shortcut" SecDesktop
  ${If} ${FileExists} "${LAUNCHER}"
    CreateShortCut "$DESKTOP\${APP_NAME}.lnk" "${LAUNCHER}" '-m ddpstudio.bootstrap launch --root "$INSTDIR"' "$INSTDIR\ddpstudio.ico" 0 SW_SHOWNORMAL "" "Train PyTorch models on all your GPUs"
    Delete "$DESKTOP\${FINISH_NAME}.lnk"
  ${EndIf}
SectionEnd

Section "-Set up PyTorch" SecSetup
  ; What the bootstrap will download and unpack (a GPU build, in KB), so the
  ; Directory page shows the real space needed and refuses a full drive.
  AddSize 8000000
  Call RunBootstrap
  ; For "Installed apps". env\ holds the packages; cache\ is hardlinked to
  ; them, so counting it too would double the size.
  ${GetSize} "$INSTDIR\env" "/S=0K" $0 $1 $2
  ${GetSize} "$INSTDIR\python" "/S=0K" $3 $1 $2
  IntOp $0 $0 + $3
  IntOp $0 $0 + 20000
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "EstimatedSize" "$0"
SectionEnd

Function .onInit
  SetShellVarContext current ; per-user Start menu and desktop
FunctionEnd

; After the sections, so that ${SecDesktop} is defined.
Function FinishShortcutOnDesktop
  ${If} ${SectionIsSelected} ${SecDesktop}
    CreateShortCut "$DESKTOP\${FINISH_NAME}.lnk" "${FINISH_CMD}" "" "$INSTDIR\ddpstudio.ico" 0 SW_SHOWNORMAL "" "Download Python and finish installing ${APP_NAME}"
  ${EndIf}
FunctionEnd

Function un.onInit
  SetShellVarContext current
FunctionEnd

; Python for the bootstrap: uv downloads it into $INSTDIR\python (no PATH,
; no registry entries), then a venv holding only the app wheel.
Function PrepareBootstrapPython
  retry:
  DetailPrint "Getting Python ${PYTHON_VERSION} (about 30 MB)..."
  nsExec::ExecToLog '"$INSTDIR\uv.exe" python install ${PYTHON_VERSION} --no-config --no-bin --no-registry'
  Pop $0
  ${If} $0 != 0
    MessageBox MB_RETRYCANCEL|MB_ICONEXCLAMATION "${APP_NAME} could not download Python.$\r$\n$\r$\nCheck that this computer is connected to the internet, then click Retry. ${NETWORK_HELP}$\r$\n$\r$\nOr click Cancel: $\"${FINISH_NAME}$\" in the Start menu completes the installation later." /SD IDCANCEL IDRETRY retry
    SetErrorLevel 3
    Abort "Python could not be downloaded."
  ${EndIf}
  nsExec::ExecToLog '"$INSTDIR\uv.exe" venv --no-config --python ${PYTHON_VERSION} --managed-python --clear "$INSTDIR\bootstrap"'
  Pop $0
  ${If} $0 == 0
    nsExec::ExecToLog '"$INSTDIR\uv.exe" pip install --no-config --python "${BOOTSTRAP_PYTHON}" --no-deps --reinstall "$INSTDIR\wheels\${APP_WHEEL}"'
    Pop $0
  ${EndIf}
  ${If} $0 != 0
    MessageBox MB_RETRYCANCEL|MB_ICONEXCLAMATION "${APP_NAME} could not prepare its Python folder in $INSTDIR.$\r$\n$\r$\nIf the disk is full, free some space. If ${APP_NAME} is running, close it. Then click Retry." /SD IDCANCEL IDRETRY retry
    SetErrorLevel 8
    Abort "The Python folder could not be prepared."
  ${EndIf}
FunctionEnd

; The environment itself. Interactive: the bootstrap's own window (a log,
; a progress bar, Retry); closing it early is fine, the first start
; finishes the job. Silent: headless, and a failure is our exit code.
Function RunBootstrap
  ${If} ${Silent}
    DetailPrint "Setting up PyTorch (log: $INSTDIR\logs\bootstrap.log)..."
    nsExec::ExecToLog '"${BOOTSTRAP_PYTHON}" -m ddpstudio.bootstrap setup --root "$INSTDIR" --no-window'
    Pop $0
    ${If} $0 != 0
      DetailPrint "PyTorch setup failed (exit code $0); see $INSTDIR\logs\bootstrap.log"
      SetErrorLevel $0
    ${EndIf}
  ${Else}
    DetailPrint "Setting up PyTorch: a separate window shows the progress..."
    ExecWait '"${LAUNCHER}" -m ddpstudio.bootstrap setup --root "$INSTDIR"' $0
    ${If} $0 != 0
      DetailPrint "PyTorch is not set up yet. ${APP_NAME} finishes the setup when you start it."
    ${EndIf}
  ${EndIf}
FunctionEnd

Function StartApp
  Exec '"${LAUNCHER}" -m ddpstudio.bootstrap launch --root "$INSTDIR"'
FunctionEnd

Section "Uninstall"
  ; Keep run history and settings unless the user says otherwise
  ; (silently: only with /REMOVEDATA).
  ${GetParameters} $R0
  ClearErrors
  ${GetOptions} $R0 "/REMOVEDATA" $R1
  ${IfNot} ${Errors}
    RMDir /r "${DATA_DIR}"
  ${Else}
    MessageBox MB_YESNO|MB_ICONQUESTION|MB_DEFBUTTON2 "Also delete your ${APP_NAME} run history and settings?$\r$\n$\r$\nThey are in ${DATA_DIR}. Choose No to keep them for a later installation." /SD IDNO IDNO keep_data
    RMDir /r "${DATA_DIR}"
    keep_data:
  ${EndIf}

  ; Only what the installer and the bootstrap created: never RMDir /r
  ; $INSTDIR itself, in case someone installed into a folder of their own.
  RMDir /r "$INSTDIR\env"
  RMDir /r "$INSTDIR\bootstrap"
  RMDir /r "$INSTDIR\python"
  RMDir /r "$INSTDIR\cache"
  RMDir /r "$INSTDIR\wheels"
  RMDir /r "$INSTDIR\logs"
  Delete "$INSTDIR\uv.exe"
  Delete "$INSTDIR\finish-setup.cmd"
  Delete "$INSTDIR\network.json"
  Delete "$INSTDIR\uninstall-blocked.txt"

  ; The app's shortcuts go in any case (what they start is gone or going).
  Delete "$DESKTOP\${APP_NAME}.lnk"
  Delete "$DESKTOP\${FINISH_NAME}.lnk"
  Delete "${MENU_DIR}\${APP_NAME}.lnk"
  Delete "${MENU_DIR}\Repair ${APP_NAME}.lnk"
  Delete "${MENU_DIR}\${FINISH_NAME}.lnk"

  Call un.Leftovers
  Pop $R2
  ${If} $R2 != ""
    ; Keep the entry, this uninstaller and its shortcut, so "Uninstall" can be run again.
    Call un.Holders
    Pop $R3
    ${If} $R3 == ""
      StrCpy $R3 "another program (for example ${APP_NAME}, a training run, or a virus scanner)"
    ${EndIf}
    DetailPrint "Still in use: $R2; held by $R3 (named by: $HoldersFoundBy)"
    ; Also in a file, for silent uninstalls and for support.
    FileOpen $R4 "$INSTDIR\uninstall-blocked.txt" w
    FileWrite $R4 "Still in use: $R2$\r$\nHeld by: $R3$\r$\nNamed by: $HoldersFoundBy$\r$\n"
    FileClose $R4
    MessageBox MB_OK|MB_ICONEXCLAMATION "${APP_NAME} could not be removed completely: $R2 in $INSTDIR is still in use by $R3.$\r$\n$\r$\nClose that program, then uninstall ${APP_NAME} again (it stays in Installed apps until then)." /SD IDOK
    SetErrorLevel 9
    Return
  ${EndIf}

  Delete "${MENU_DIR}\Uninstall ${APP_NAME}.lnk"
  RMDir "${MENU_DIR}"
  Delete "$INSTDIR\ddpstudio.ico"
  Delete "$INSTDIR\Uninstall.exe"
  RMDir "$INSTDIR"
  DeleteRegKey HKCU "${UNINSTALL_KEY}"
SectionEnd

; Pushes the name of our folder or file number INDEX (0..6) in $INSTDIR.
Function un.OurItem
  Exch $0
  ${Select} $0
    ${Case} 0
      StrCpy $0 "env"
    ${Case} 1
      StrCpy $0 "bootstrap"
    ${Case} 2
      StrCpy $0 "python"
    ${Case} 3
      StrCpy $0 "cache"
    ${Case} 4
      StrCpy $0 "wheels"
    ${Case} 5
      StrCpy $0 "logs"
    ${Case} 6
      StrCpy $0 "uv.exe"
  ${EndSelect}
  Exch $0
FunctionEnd
!define OUR_ITEMS_LAST 6

; Pushes which of our folders and files are still there ("" when none).
Function un.Leftovers
  StrCpy $0 ""
  ${ForEach} $1 0 ${OUR_ITEMS_LAST} + 1
    Push $1
    Call un.OurItem
    Pop $2
    ${If} ${FileExists} "$INSTDIR\$2"
      ${If} $0 == ""
        StrCpy $0 "$2"
      ${Else}
        StrCpy $0 "$0, $2"
      ${EndIf}
    ${EndIf}
  ${Next}
  Push $0
FunctionEnd

; Pushes who holds the files left in $INSTDIR ("" when nobody can be named) and sets
; $HoldersFoundBy. Windows' Restart Manager first: it names any holder, wherever it
; runs from (Explorer, an editor, a virus scanner). Then, when it names none or fails
; (Wine's rstrtmgr.dll is a stub that always answers "none"), the programs running
; from $INSTDIR. A folder that is some program's working directory holds no file, so
; only the second way can find that program, and only if it runs from $INSTDIR.
Function un.Holders
  Call un.RestartManagerHolders
  Pop $0
  StrCpy $HoldersFoundBy "Restart Manager"
  ${If} $0 == ""
    Call un.ToolhelpHolders
    Pop $0
    StrCpy $HoldersFoundBy "programs running from the install folder"
  ${EndIf}
  ${If} $0 == ""
    StrCpy $HoldersFoundBy "nobody (neither the Restart Manager nor the programs running from the install folder)"
  ${EndIf}
  Push $0
FunctionEnd

; Windows' Restart Manager (rstrtmgr.dll), the API ddpstudio/core/process/restartmgr.py
; calls for the app. RM_PROCESS_INFO holds no pointer, so it is 668 bytes in x86 and
; amd64 builds alike: RM_UNIQUE_PROCESS {DWORD pid; FILETIME start} (12 bytes), WCHAR
; strAppName[256] at 12, WCHAR strServiceShortName[64] at 524, then ApplicationType,
; AppStatus, TSSessionId and bRestartable (4 bytes each) at 652..667.
!define RM_PROCESS_INFO_SIZE 668
!define RM_APP_NAME_OFFSET 12
!define RM_APP_NAME_CHARS 256
!define RM_MAX_FILES 64 ; asked about: the first files left, which after RMDir /r are the held ones
!define /math RM_FILES_BYTES ${RM_MAX_FILES} * ${NSIS_PTR_SIZE}
!define ERROR_MORE_DATA 234

; Pushes "name (process PID), ..." for the processes the Restart Manager says hold
; the files left in our folders; "" when it names none or any call fails. The
; session always ends; every buffer is freed.
Function un.RestartManagerHolders
  StrCpy $RmCount 0
  System::Alloc ${RM_FILES_BYTES} ; LPCWSTR[RM_MAX_FILES]
  Pop $RmFiles
  ${ForEach} $1 0 ${OUR_ITEMS_LAST} + 1
    Push $1
    Call un.OurItem
    Pop $2
    ${If} ${FileExists} "$INSTDIR\$2\*.*"
      ${Locate} "$INSTDIR\$2" "/L=F" "un.RmCollect" ; recursive FindFirst/FindNext
    ${ElseIf} ${FileExists} "$INSTDIR\$2"
      Push "$INSTDIR\$2"
      Call un.RmAddFile
    ${EndIf}
  ${Next}

  StrCpy $0 ""
  ${If} $RmCount > 0
    ; DWORD RmStartSession(DWORD *session, DWORD flags, WCHAR key[CCH_RM_SESSION_KEY + 1])
    System::Call 'rstrtmgr::RmStartSession(*i .r1, i 0, w .r2) i .r3'
    ${If} $3 == 0
      ; DWORD RmRegisterResources(DWORD session, UINT nFiles, LPCWSTR files[], UINT nApps,
      ;   RM_UNIQUE_PROCESS apps[], UINT nServices, LPCWSTR services[])
      System::Call 'rstrtmgr::RmRegisterResources(i r1, i $RmCount, p $RmFiles, i 0, p 0, i 0, p 0) i .r3'
      ${If} $3 == 0
        Push $1
        Call un.RmList
        Pop $0
      ${EndIf}
      System::Call 'rstrtmgr::RmEndSession(i r1) i'
    ${EndIf}
  ${EndIf}

  IntOp $4 $RmCount - 1
  ${ForEach} $1 0 $4 + 1
    IntOp $2 $1 * ${NSIS_PTR_SIZE}
    IntPtrOp $2 $RmFiles + $2
    System::Call '*$2(p .r3)'
    System::Free $3
  ${Next}
  System::Free $RmFiles
  Push $0
FunctionEnd

; ${Locate} callback: $R9 is a file's full path.
Function un.RmCollect
  ${If} $RmCount >= ${RM_MAX_FILES}
    Push "StopLocate"
  ${Else}
    Push $R9
    Call un.RmAddFile
    Push ""
  ${EndIf}
FunctionEnd

; Pops a path and adds a copy of it to $RmFiles (up to RM_MAX_FILES).
Function un.RmAddFile
  Exch $0
  Push $1
  Push $2
  ${If} $RmCount < ${RM_MAX_FILES}
    StrLen $1 $0
    IntOp $1 $1 + 1
    System::Call '*(&w$1 r0) p .r2' ; a WCHAR copy, freed by un.RestartManagerHolders
    IntOp $1 $RmCount * ${NSIS_PTR_SIZE}
    IntPtrOp $1 $RmFiles + $1
    System::Call '*$1(p r2)'
    IntOp $RmCount $RmCount + 1
  ${EndIf}
  Pop $2
  Pop $1
  Pop $0
FunctionEnd

; Pops a session handle, pushes "name (process PID), ..." from RmGetList ("" on failure). Uses $0.
Function un.RmList
  Exch $1
  Push $2
  Push $3
  Push $4
  Push $5
  Push $6
  Push $7
  Push $8
  Push $9
  System::Call 'kernel32::GetCurrentProcessId() i .r9'
  StrCpy $0 ""
  StrCpy $5 0 ; RM_PROCESS_INFO[$6]
  StrCpy $6 0
  ; ERROR_MORE_DATA: call again with room for the count it needs (the list can grow in between).
  ${ForEach} $7 1 3 + 1
    ; DWORD RmGetList(DWORD session, UINT *needed, UINT *count, RM_PROCESS_INFO infos[], DWORD *rebootReasons)
    System::Call 'rstrtmgr::RmGetList(i r1, *i .r3, *i r6 r4, p r5, *i .r8) i .r2'
    ${IfThen} $2 != ${ERROR_MORE_DATA} ${|} ${Break} ${|}
    ${IfThen} $5 != 0 ${|} System::Free $5 ${|}
    StrCpy $6 $3
    IntOp $8 $6 * ${RM_PROCESS_INFO_SIZE}
    System::Alloc $8
    Pop $5
  ${Next}
  ${If} $2 == 0
    IntOp $4 $4 - 1
    ${ForEach} $7 0 $4 + 1
      IntOp $8 $7 * ${RM_PROCESS_INFO_SIZE}
      IntPtrOp $8 $5 + $8
      System::Call '*$8(i .r3)' ; Process.dwProcessId
      IntPtrOp $8 $8 + ${RM_APP_NAME_OFFSET}
      System::Call '*$8(&w${RM_APP_NAME_CHARS} .r8)' ; strAppName
      ${If} $3 != $9
        ${If} $0 == ""
          StrCpy $0 "$8 (process $3)"
        ${Else}
          StrCpy $0 "$0, $8 (process $3)"
        ${EndIf}
      ${EndIf}
    ${Next}
  ${EndIf}
  ${IfThen} $5 != 0 ${|} System::Free $5 ${|}
  Pop $9
  Pop $8
  Pop $7
  Pop $6
  Pop $5
  Pop $4
  Pop $3
  Pop $2
  Pop $1
  Push $0
FunctionEnd

; Pushes the running programs started from $INSTDIR ("python.exe (process 1234), ..."),
; the usual holders (the app, its training ranks, its uv). Toolhelp snapshot +
; QueryFullProcessImageNameW; "" when there are none.
Function un.ToolhelpHolders
  StrCpy $0 ""
  StrLen $5 "$INSTDIR\"
  System::Call 'kernel32::GetCurrentProcessId() i .r8'
  StrCpy $R5 $8 ; not this uninstaller (run in place with _?=)
  System::Call 'kernel32::CreateToolhelp32Snapshot(i 2, i 0) p .r1' ; TH32CS_SNAPPROCESS
  ${If} $1 == -1
    Push ""
    Return
  ${EndIf}
  ; PROCESSENTRY32W: dwSize, cntUsage, th32ProcessID, th32DefaultHeapID (pointer-sized), ..., szExeFile[260]
  !if ${NSIS_PTR_SIZE} > 4
    !define PE32_SIZE 568
  !else
    !define PE32_SIZE 556
  !endif
  System::Alloc ${PE32_SIZE}
  Pop $2
  System::Call '*$2(i ${PE32_SIZE})'
  System::Call 'kernel32::Process32FirstW(p r1, p r2) i .r3'
  ${DoWhile} $3 != 0
    System::Call '*$2(i, i, i .r4)'
    StrCpy $6 0
    ${If} $4 != $R5
      System::Call 'kernel32::OpenProcess(i 0x1000, i 0, i r4) p .r6' ; PROCESS_QUERY_LIMITED_INFORMATION
    ${EndIf}
    ${If} $6 != 0
      System::Call 'kernel32::QueryFullProcessImageNameW(p r6, i 0, w .r7, *i ${NSIS_MAX_STRLEN}) i .r8'
      System::Call 'kernel32::CloseHandle(p r6)'
      StrCpy $9 $7 $5
      ${If} $8 != 0
      ${AndIf} $9 == "$INSTDIR\"
        ${GetFileName} $7 $9
        ${If} $0 == ""
          StrCpy $0 "$9 (process $4)"
        ${Else}
          StrCpy $0 "$0, $9 (process $4)"
        ${EndIf}
      ${EndIf}
    ${EndIf}
    System::Call 'kernel32::Process32NextW(p r1, p r2) i .r3'
  ${Loop}
  System::Free $2
  System::Call 'kernel32::CloseHandle(p r1)'
  Push $0
FunctionEnd
