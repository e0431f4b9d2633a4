cmake_minimum_required(VERSION 3.20)
# Fails if library code touches the disk other than through the file layer
# (STYLE.md: every create, write, sync, rename, remove, list and stat goes
# through FileSystem). Run by ctest as FileLayer.OnlyTheFileSystemTouchesTheDisk:
#   cmake -DSOURCE_DIR=<repo> -P tests/file_layer_check.cmake
set(layers base graph data ops runtime bundle checkpoint)
# The POSIX FileSystem itself; everything else (base/atomic_file.cc included)
# goes through it.
set(allowed base/file_system.cc)
# An exemption for a file that is gone would silently cover its successor.
foreach(f IN LISTS allowed)
  if(NOT EXISTS ${SOURCE_DIR}/${f})
    message(FATAL_ERROR "tests/file_layer_check.cmake allows ${f}, which does not exist")
  endif()
endforeach()
# Calls, not words: comments may say "fsync".
set(forbidden
  "std::filesystem" "<filesystem>" "<fstream>" "fopen\\(" "::open\\(" "::openat\\(" "::stat\\("
  "::lstat\\(" "::access\\(" "fsync\\(" "fdatasync\\(" "::unlink\\(" "::rename\\("
  "std::rename\\(" "std::remove\\(" "::mkdir\\(" "::rmdir\\(" "opendir\\(" "::pwrite\\("
  "::write\\(" "::truncate\\(" "::ftruncate\\(")
set(violations "")
foreach(layer IN LISTS layers)
  if(NOT IS_DIRECTORY ${SOURCE_DIR}/${layer})
    continue()
  endif()
  file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${layer}/*.cc ${SOURCE_DIR}/${layer}/*.h)
  foreach(f IN LISTS files)
    if(f IN_LIST allowed)
      continue()
    endif()
    file(STRINGS ${SOURCE_DIR}/${f} lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      string(REGEX REPLACE "//.*$" "" code "${line}")
      foreach(pattern IN LISTS forbidden)
        if(code MATCHES "${pattern}")
          string(APPEND violations "  ${f}:${n}: ${line}\n")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "disk access outside the file layer (use FileSystem):\n${violations}")
endif()
message(STATUS "only the file layer touches the disk")
