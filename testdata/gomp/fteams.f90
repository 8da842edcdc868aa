! fteams.f90 (gfortran-12, libgomp): two levels of teams built by gfortran.
! Level 1: 2 threads; thread 1 sets nthreads-var 3 and run-sched-var
! guided,4 before its nested team; thread 0's nested team has the
! environment's size (OMP_NUM_THREADS=2). Every thread records itself
! (record.h) and parks in user code; the main thread (thread 0 of both
! levels) announces READY once the 5 records exist.
program fteams
  use omp_lib
  implicit none
  interface
    subroutine finit() bind(c, name='finit')
    end subroutine
    subroutine frec_park() bind(c, name='frec_park')
    end subroutine
    subroutine fannounce(n) bind(c, name='fannounce')
      use iso_c_binding
      integer(c_int), value :: n
    end subroutine
  end interface
  call finit()
  !$omp parallel num_threads(2)
  if (omp_get_thread_num() == 1) then
    call omp_set_num_threads(3)
    call omp_set_schedule(omp_sched_guided, 4)
  end if
  !$omp parallel
  if (omp_get_thread_num() == 0 .and. omp_get_ancestor_thread_num(1) == 0) then
    call fannounce(5)
  else
    call frec_park()
  end if
  !$omp end parallel
  !$omp end parallel
end program
