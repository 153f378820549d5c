# cmake/install.cmake: the installable ftl: libftl.so and libftl.a (the in-rank library: everything
# behind include/ftl/ftl.h), the public headers, ftl.pc, the CMake package (find_package(ftl) ->
# ftl::ftl), the ftl binary, the Python binding (python/ftl), docs and man pages; and the same files
# in Debian's layout, one install component per package, for scripts/build-deb.sh (packaging/).
# Included last from the top-level CMakeLists.txt, after every part has defined its targets.
#
# Not here: how the parts build their static libraries (their own CMakeLists.txt). This file only
# marks them position-independent with hidden visibility and bundles their objects. Nor what makes
# a Debian package of the installed files (stripping, control files): scripts/build-deb.sh.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The static libraries behind include/ftl/ftl.h; without the checkpoint (no HDF5 or xxhash) there
# is no in-rank library to install.
set(FTL_LIB_PARTS ftl_core ftl_wire ftl_rdzv ftl_ckpt_io ftl_ckpt ftl_cadence)
# The final adapter's door (include/ftl/adapter.h: safetensors and the commit marker, over
# OpenSSL's SHA-256) where the pipeline is built.
if(TARGET ftl_adapter_io)
  list(APPEND FTL_LIB_PARTS ftl_adapter_io)
endif()
set(FTL_LIB_OBJECTS)
foreach(part ${FTL_LIB_PARTS})
  if(NOT TARGET ${part})
    message(WARNING "install: ${part} is not built; libftl is not built")
    return()
  endif()
  # Hidden by default: only FTL_API (include/ftl/export.h) leaves libftl.so.
  set_target_properties(${part} PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
  list(APPEND FTL_LIB_OBJECTS $<TARGET_OBJECTS:${part}>)
endforeach()

# What the parts link outside ftl (their own CMakeLists.txt): the shared library's dependencies.
set(FTL_LIB_DEPS MPI::MPI_C PkgConfig::JANSSON Threads::Threads ${XXHASH_LIBRARY} m)
if(TARGET hdf5::hdf5)
  list(APPEND FTL_LIB_DEPS hdf5::hdf5)
else()
  list(APPEND FTL_LIB_DEPS ${HDF5_C_LIBRARIES})
endif()
# The CUDA runtime and NCCL are loaded at run time (rendezvous/gpu_cuda.c), not linked: the library
# loads on a host without them.
list(APPEND FTL_LIB_DEPS ${CMAKE_DL_LIBS})
if(TARGET ftl_adapter_io)
  # The cache variable: pipeline/'s OpenSSL::Crypto target is not visible from here.
  list(APPEND FTL_LIB_DEPS ${OPENSSL_CRYPTO_LIBRARY})
endif()

# The shared library: the parts' objects, and their outside dependencies.
add_library(ftl_shared SHARED ${FTL_LIB_OBJECTS})
target_link_libraries(ftl_shared PRIVATE ${FTL_LIB_DEPS})
target_include_directories(ftl_shared INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_options(ftl_shared PRIVATE -Wl,--no-undefined -Wl,--as-needed)
set_target_properties(ftl_shared PROPERTIES OUTPUT_NAME ftl EXPORT_NAME ftl VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR} LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
add_library(ftl::ftl ALIAS ftl_shared)

# The static library: the same objects in one archive (a program links it with `pkg-config
# --static --libs ftl`).
add_library(ftl_static STATIC ${FTL_LIB_OBJECTS})
set_target_properties(ftl_static PROPERTIES OUTPUT_NAME ftl ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
# A sanitizer build links core/sanitizer_keep_plugins.c into every target (link_libraries): a
# helper for ftl's own test programs, not part of the library, and not exportable.
foreach(t ftl_shared ftl_static)
  foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(libs ${t} ${prop})
    if(libs)
      list(REMOVE_ITEM libs ftl_keep_plugins)
      set_target_properties(${t} PROPERTIES ${prop} "${libs}")
    endif()
  endforeach()
endforeach()

# pkg-config's private part: what `pkg-config --static --libs ftl` adds to libftl.a. The
# dependencies' own pkg-config modules where the system has them (Requires.private: Debian's
# mpi-c, hdf5-serial, jansson, libxxhash), else bare -l names; never a -L of the build machine
# (ftl.pc is installed on other machines: the CUDA runtime and NCCL are -lcudart and -lnccl, found
# where the program's own link finds them).
function(ftl_pc_private libs_out requires_out)
  set(libs)
  set(requires)
  # Each group: the pkg-config modules to try, in order, then the libraries it stands for.
  set(groups "mpi-c ompi-c|${MPI_C_LIBRARIES}" "hdf5-serial hdf5|${HDF5_C_LIBRARIES}"
             "libxxhash|${XXHASH_LIBRARY}" "jansson|${JANSSON_LINK_LIBRARIES}")
  if(TARGET ftl_adapter_io)
    list(APPEND groups "libcrypto|${OPENSSL_CRYPTO_LIBRARY}")
  endif()
  foreach(group IN LISTS groups)
    string(REPLACE "|" ";" group "${group}")
    list(POP_FRONT group modules)
    string(REPLACE " " ";" modules "${modules}")
    set(found "")
    foreach(m IN LISTS modules)
      execute_process(COMMAND ${PKG_CONFIG_EXECUTABLE} --exists ${m} RESULT_VARIABLE rc)
      if(rc EQUAL 0)
        set(found ${m})
        break()
      endif()
    endforeach()
    if(found)
      list(APPEND requires ${found})
      continue()
    endif()
    foreach(lib IN LISTS group)
      if(lib MATCHES "^/")
        get_filename_component(name ${lib} NAME_WE)
        string(REGEX REPLACE "^lib" "" name ${name})
        list(APPEND libs "-l${name}")
      endif()
    endforeach()
  endforeach()
  list(APPEND libs -lpthread -lm)
  list(REMOVE_DUPLICATES libs)
  list(JOIN libs " " libs)
  list(JOIN requires " " requires)
  set(${libs_out} "${libs}" PARENT_SCOPE)
  set(${requires_out} "${requires}" PARENT_SCOPE)
endfunction()
ftl_pc_private(FTL_PC_LIBS_PRIVATE FTL_PC_REQUIRES_PRIVATE)

# ftl_install_layout(OUT dir LIBDIR dir PYDIR dir LIB comp DEV comp BIN comp PY comp [SUFFIX s]
#                    [EXCLUDE_FROM_ALL])
# Every install rule, for one library folder: the library (LIB), its development files (DEV: the
# .so link, libftl.a, headers, ftl.pc, the CMake package), the ftl binary with docs and man pages
# (BIN) and the Python binding under PYDIR (PY; none when PYDIR is empty). Files that depend on the
# folder (ftl.pc, ftlConfig.cmake, the binding's _install.py) are written under OUT. DEBIAN: the
# packages' layout, where packaging/copyright carries the license instead of a LICENSE file.
function(ftl_install_layout)
  cmake_parse_arguments(L "EXCLUDE_FROM_ALL;DEBIAN" "OUT;LIBDIR;PYDIR;LIB;DEV;BIN;PY;SUFFIX" "" ${ARGN})
  set(x "")
  if(L_EXCLUDE_FROM_ALL)
    set(x EXCLUDE_FROM_ALL)
  endif()
  install(TARGETS ftl_shared EXPORT ftlTargets${L_SUFFIX}
          LIBRARY DESTINATION ${L_LIBDIR} COMPONENT ${L_LIB} NAMELINK_COMPONENT ${L_DEV} ${x})
  install(TARGETS ftl_static ARCHIVE DESTINATION ${L_LIBDIR} COMPONENT ${L_DEV} ${x})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ftl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT ${L_DEV} ${x} FILES_MATCHING PATTERN "*.h")
  if(TARGET ftl)
    install(TARGETS ftl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${L_BIN} ${x})
    # The rank agent's own binary (launcher/agent_main.c): `ftl run` finds it as
    # ../libexec/ftl/ftl-rank-agent beside the binary (launcher/gang.h, ln_gang_agent_exe).
    install(TARGETS ftl-rank-agent RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/ftl COMPONENT ${L_BIN} ${x})
    # launcher/pyrun.py: `ftl run` finds it beside the binary, as ../share/ftl/pyrun.py.
    install(FILES ${PROJECT_SOURCE_DIR}/launcher/pyrun.py DESTINATION ${CMAKE_INSTALL_DATADIR}/ftl COMPONENT ${L_BIN} ${x})
  endif()

  # The CMake package: find_package(ftl) gives ftl::ftl.
  set(cmakedir ${L_LIBDIR}/cmake/ftl)
  install(EXPORT ftlTargets${L_SUFFIX} FILE ftlTargets.cmake NAMESPACE ftl:: DESTINATION ${cmakedir}
          COMPONENT ${L_DEV} ${x})
  configure_package_config_file(${FTL_CMAKE_SOURCE_DIR}/ftlConfig.cmake.in ${L_OUT}/ftlConfig.cmake
                                INSTALL_DESTINATION ${cmakedir})
  install(FILES ${L_OUT}/ftlConfig.cmake ${CMAKE_BINARY_DIR}/ftlConfigVersion.cmake
          DESTINATION ${cmakedir} COMPONENT ${L_DEV} ${x})

  # pkg-config, relocatable: the prefix is found from the .pc file's own folder, so an install
  # under any prefix or DESTDIR works.
  file(RELATIVE_PATH FTL_PC_TO_PREFIX /${L_LIBDIR}/pkgconfig /)
  string(REGEX REPLACE "/$" "" FTL_PC_TO_PREFIX "${FTL_PC_TO_PREFIX}")
  set(FTL_PC_LIBDIR ${L_LIBDIR})
  configure_file(${FTL_CMAKE_SOURCE_DIR}/ftl.pc.in ${L_OUT}/ftl.pc @ONLY)
  install(FILES ${L_OUT}/ftl.pc DESTINATION ${L_LIBDIR}/pkgconfig COMPONENT ${L_DEV} ${x})

  # The Python binding finds libftl through _install.py: the library's path relative to the package.
  if(L_PYDIR)
    file(RELATIVE_PATH to_lib /${L_PYDIR}/ftl /${L_LIBDIR}/libftl.so.${PROJECT_VERSION_MAJOR})
    file(WRITE ${L_OUT}/python-install/_install.py
         "# Written by cmake --install: where libftl is, relative to this package.\nLIBRARY = \"${to_lib}\"\n")
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/ftl DESTINATION ${L_PYDIR} COMPONENT ${L_PY} ${x}
            FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
    install(FILES ${L_OUT}/python-install/_install.py DESTINATION ${L_PYDIR}/ftl COMPONENT ${L_PY} ${x})
    # The distribution's metadata (the core metadata spec, version 2.4), so that importlib.metadata
    # and pip know the binding: its name, version and license.
    set(dist ${L_OUT}/python-install/ftl-${PROJECT_VERSION}.dist-info)
    file(WRITE ${dist}/METADATA "Metadata-Version: 2.4\nName: ftl\nVersion: ${PROJECT_VERSION}\n"
         "Summary: Python binding of ftl, a fault-tolerant launcher for distributed fine-tunes\n"
         "License-Expression: Apache-2.0\nRequires-Python: >=3.9\n")
    file(WRITE ${dist}/top_level.txt "ftl\n")
    install(DIRECTORY ${dist} DESTINATION ${L_PYDIR} COMPONENT ${L_PY} ${x})
  endif()

  # Docs, and man pages where they exist (docs/man/*.N into share/man/manN; globbed at install
  # time, so pages added after the configure are installed too).
  install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ${L_BIN} ${x})
  if(NOT L_DEBIAN)
    install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ${L_BIN} ${x})
  endif()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ${L_BIN} ${x}
          FILES_MATCHING PATTERN "*.md" PATTERN "man" EXCLUDE)
  foreach(section 1 5 7)
    install(CODE "file(GLOB pages \"${PROJECT_SOURCE_DIR}/docs/man/*.${section}\")
      if(pages)
        file(INSTALL \${pages} DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_MANDIR}/man${section}\")
      endif()" COMPONENT ${L_BIN} ${x})
  endforeach()
endfunction()
set(FTL_CMAKE_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ftlConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)

# The Python binding's folder: the platform's path for packages (Debian: lib/python3/dist-packages,
# the 'deb_system' scheme; elsewhere the interpreter's purelib), relative to the prefix.
find_program(FTL_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT FTL_PYTHON3)
  find_program(FTL_PYTHON3 NAMES python3)
endif()
if(FTL_PYTHON3 AND NOT FTL_PYTHON_INSTALL_DIR)
  execute_process(
    COMMAND ${FTL_PYTHON3} -c "import sysconfig as s
scheme = 'deb_system' if 'deb_system' in s.get_scheme_names() else s.get_default_scheme()
print(s.get_path('purelib', scheme, vars={'base': '/PREFIX', 'platbase': '/PREFIX'}).replace('/PREFIX/', '', 1))"
    OUTPUT_VARIABLE FTL_PY_DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE FTL_PY_RC)
  if(FTL_PY_RC EQUAL 0 AND FTL_PY_DIR)
    set(FTL_PYTHON_INSTALL_DIR ${FTL_PY_DIR} CACHE STRING "Where the Python binding goes, relative to the prefix")
  endif()
endif()

# `cmake --install BUILD [--prefix P]`: components runtime (libftl.so.N, bin/ftl, the binding,
# docs, man pages) and dev (the rest).
ftl_install_layout(OUT ${CMAKE_BINARY_DIR} LIBDIR ${CMAKE_INSTALL_LIBDIR} PYDIR "${FTL_PYTHON_INSTALL_DIR}"
                   LIB runtime DEV dev BIN runtime PY runtime)

# The Debian packages (scripts/build-deb.sh, packaging/): the same files again in Debian's layout
# for prefix /usr, whatever this build's own prefix: the library in the multiarch folder
# (usr/lib/x86_64-linux-gnu), the binding in usr/lib/python3/dist-packages. One component per
# package (deb-libftl0, deb-libftl-dev, deb-ftl, deb-python3-ftl), left out of a plain install.
set(FTL_DEB_MULTIARCH "")
find_program(FTL_DPKG_ARCHITECTURE dpkg-architecture)
if(FTL_DPKG_ARCHITECTURE)
  execute_process(COMMAND ${FTL_DPKG_ARCHITECTURE} -qDEB_HOST_MULTIARCH OUTPUT_VARIABLE FTL_DEB_MULTIARCH
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(NOT FTL_DEB_MULTIARCH)
  set(FTL_DEB_MULTIARCH "${CMAKE_LIBRARY_ARCHITECTURE}")
endif()
if(FTL_DEB_MULTIARCH)
  ftl_install_layout(OUT ${CMAKE_BINARY_DIR}/packaging-deb SUFFIX Deb EXCLUDE_FROM_ALL DEBIAN
                     LIBDIR lib/${FTL_DEB_MULTIARCH} PYDIR lib/python3/dist-packages
                     LIB deb-libftl0 DEV deb-libftl-dev BIN deb-ftl PY deb-python3-ftl)
  # The packages that provide what libftl0 loads at run time when it is there (rendezvous/
  # gpu_cuda.c: the CUDA runtime, NCCL), named as NVIDIA's Debian repository names them: libftl0
  # Suggests them (scripts/build-deb.sh), since it loads and takes the CPU path without them.
  set(gpu_suggests "")
  if(FTL_HAVE_CUDA)
    list(APPEND gpu_suggests "cuda-cudart-${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
  endif()
  if(FTL_HAVE_NCCL)
    list(APPEND gpu_suggests libnccl2)
  endif()
  list(JOIN gpu_suggests ", " gpu_suggests)
  file(WRITE ${CMAKE_BINARY_DIR}/packaging-deb/gpu-suggests "${gpu_suggests}\n")
endif()
