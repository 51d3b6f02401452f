# castellan_target_warnings(<target>): our warning set, on our targets only.
# Dependencies come in as SYSTEM includes, so their headers never trip -Werror.
function(castellan_target_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual
    -Wformat=2 -Wimplicit-fallthrough)
  if(CASTELLAN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
