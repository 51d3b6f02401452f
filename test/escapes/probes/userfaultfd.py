# userfaultfd (race-widening primitive for kernel exploits).
verdict(sys_call(323, 0))
