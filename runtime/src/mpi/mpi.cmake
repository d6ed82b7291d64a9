# Included from runtime/CMakeLists.txt (same directory scope, so paths are relative to
# runtime/). Builds libcofactor_runtime_mpi.so when MPI is found: DistributedDevice plus its
# own copy of the simulator sources (the runtime exports only the C ABI, so the kernels are
# compiled into this library too, with the same flags).
option(COFACTOR_WITH_MPI "Build the MPI-distributed device when MPI is found" ON)
if(COFACTOR_WITH_MPI)
  find_package(MPI COMPONENTS CXX QUIET)
endif()
if(COFACTOR_WITH_MPI AND MPI_CXX_FOUND)
  message(STATUS "cofactor: MPI found (${MPI_CXX_LIBRARIES}): building libcofactor_runtime_mpi.so")
  get_target_property(_cf_sources cofactor_runtime SOURCES)
  # everything but the C ABI layer (capi*.cpp, the loader, interrupts, gradient support)
  list(FILTER _cf_sources EXCLUDE REGEX "(capi[a-z_]*|DistributedLoader|Interrupt|GradientSupport)\\.cpp$")
  add_library(cofactor_runtime_mpi SHARED
    src/mpi/DistributedDevice.cpp src/mpi/DistributedAdjoint.cpp ${_cf_sources})
  target_include_directories(cofactor_runtime_mpi
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src)
  get_target_property(_cf_options cofactor_runtime COMPILE_OPTIONS)
  target_compile_options(cofactor_runtime_mpi PRIVATE ${_cf_options})
  target_link_libraries(cofactor_runtime_mpi PRIVATE Threads::Threads MPI::MPI_CXX)
  target_link_options(cofactor_runtime_mpi PRIVATE -Wl,--no-undefined)
  set_target_properties(cofactor_runtime_mpi PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
else()
  message(STATUS "cofactor: MPI not found: the distributed device is not built")
endif()
