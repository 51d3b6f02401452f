# ASan / UBSan for the whole build (dependencies are prebuilt and stay
# uninstrumented, which ASan and UBSan tolerate).
if(CASTELLAN_ASAN)
  add_compile_options(-fsanitize=address -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address)
endif()
if(CASTELLAN_UBSAN)
  add_compile_options(-fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=undefined)
endif()
