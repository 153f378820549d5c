# cmake/install.cmake: the installable ftl: libftl.so and libftl.a (the in-rank library: everything
# behind include/ftl/ftl.h), the public headers, ftl.pc, the CMake package (find_package(ftl) ->
# ftl::ftl), the ftl binary, the Python binding (python/ftl), docs and man pages, and the CPack
# Debian package. Included last from the top-level CMakeLists.txt, after every part has defined
# its targets.
#
# Not here: how the parts build their static libraries (their own CMakeLists.txt). This file only
# marks them position-independent with hidden visibility and bundles their objects.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The static libraries behind include/ftl/ftl.h; without the checkpoint (no HDF5 or xxhash) there
# is no in-rank library to install.
set(FTL_LIB_PARTS ftl_core ftl_wire ftl_rdzv ftl_ckpt_io ftl_ckpt ftl_cadence)
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
if(FTL_HAVE_CUDA)
  list(APPEND FTL_LIB_DEPS CUDA::cudart)
endif()
if(FTL_HAVE_NCCL)
  list(APPEND FTL_LIB_DEPS ${NCCL_LIBRARY})
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

install(TARGETS ftl_shared EXPORT ftlTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(TARGETS ftl_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ftl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h")
if(TARGET ftl)
  install(TARGETS ftl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()

# The CMake package: find_package(ftl) gives ftl::ftl.
set(FTL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ftl)
install(EXPORT ftlTargets NAMESPACE ftl:: DESTINATION ${FTL_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ftlConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/ftlConfig.cmake INSTALL_DESTINATION ${FTL_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ftlConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ftlConfig.cmake ${CMAKE_BINARY_DIR}/ftlConfigVersion.cmake
        DESTINATION ${FTL_CMAKE_DIR} COMPONENT dev)

# pkg-config. Libs.private lists what `--static` needs besides libftl.a.
set(FTL_PC_LIBS_PRIVATE)
foreach(lib ${MPI_C_LIBRARIES} ${HDF5_C_LIBRARIES} ${XXHASH_LIBRARY} ${JANSSON_LINK_LIBRARIES})
  if(lib MATCHES "^/")
    get_filename_component(libdir ${lib} DIRECTORY)
    get_filename_component(libname ${lib} NAME_WE)
    string(REGEX REPLACE "^lib" "" libname ${libname})
    list(APPEND FTL_PC_LIBS_PRIVATE "-L${libdir}" "-l${libname}")
  endif()
endforeach()
if(FTL_HAVE_CUDA)
  list(APPEND FTL_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR}" -lcudart)
endif()
if(FTL_HAVE_NCCL)
  get_filename_component(libdir ${NCCL_LIBRARY} DIRECTORY)
  get_filename_component(libname ${NCCL_LIBRARY} NAME)
  # A runtime-only NCCL has libnccl.so.2 and no unversioned link: name the file itself then.
  if(libname MATCHES "\\.so\\.[0-9]+$")
    list(APPEND FTL_PC_LIBS_PRIVATE "-L${libdir}" "-l:${libname}")
  else()
    list(APPEND FTL_PC_LIBS_PRIVATE "-L${libdir}" -lnccl)
  endif()
endif()
list(APPEND FTL_PC_LIBS_PRIVATE -lpthread -lm)
list(REMOVE_DUPLICATES FTL_PC_LIBS_PRIVATE)
list(JOIN FTL_PC_LIBS_PRIVATE " " FTL_PC_LIBS_PRIVATE)
# Relocatable: the prefix is found from the .pc file's own folder, so an install under any prefix
# or DESTDIR works.
file(RELATIVE_PATH FTL_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" FTL_PC_TO_PREFIX "${FTL_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/ftl.pc.in ${CMAKE_BINARY_DIR}/ftl.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ftl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# The Python binding: into the platform's path for packages (Debian: lib/python3/dist-packages,
# the 'deb_system' scheme; elsewhere the interpreter's purelib), relative to the prefix. It finds
# libftl through _install.py, which records the library's path relative to the package.
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
if(FTL_PYTHON_INSTALL_DIR)
  file(RELATIVE_PATH FTL_PY_TO_LIB /${FTL_PYTHON_INSTALL_DIR}/ftl
       /${CMAKE_INSTALL_LIBDIR}/libftl.so.${PROJECT_VERSION_MAJOR})
  file(WRITE ${CMAKE_BINARY_DIR}/python-install/_install.py
       "# Written by cmake --install: where libftl is, relative to this package.\nLIBRARY = \"${FTL_PY_TO_LIB}\"\n")
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/ftl DESTINATION ${FTL_PYTHON_INSTALL_DIR} COMPONENT runtime
          FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
  install(FILES ${CMAKE_BINARY_DIR}/python-install/_install.py DESTINATION ${FTL_PYTHON_INSTALL_DIR}/ftl
          COMPONENT runtime)
endif()

# Docs, and man pages where they exist (docs/man/*.N into share/man/manN; globbed at install time,
# so pages added after the configure are installed too).
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime
        FILES_MATCHING PATTERN "*.md" PATTERN "man" EXCLUDE)
foreach(section 1 5 7)
  install(CODE "file(GLOB pages \"${PROJECT_SOURCE_DIR}/docs/man/*.${section}\")
    if(pages)
      file(INSTALL \${pages} DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_MANDIR}/man${section}\")
    endif()" COMPONENT runtime)
endforeach()

# The Debian package: `cpack -G DEB` in the build folder gives ftl_<version>_amd64.deb.
set(CPACK_PACKAGE_NAME ftl)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ftl maintainers <ftl@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "fault-tolerant launcher for distributed fine-tunes")
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "openmpi-bin, libopenmpi3, libhdf5-103-1, libjansson4, libyaml-0-2, libarchive13, libxxhash0, libssl3, python3, python3-numpy")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch")
include(CPack)
